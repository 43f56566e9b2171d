/**
 * The way back from drover to kube-proxy (docs/takeover.md): on a node
 * where drover ran, `drover cleanup` then the real kube-proxy (the peers
 * build) gives what kube-proxy gives on a node drover never ran on. One
 * real API server with a NodePort Service and two endpoints; each node is
 * a fresh set of namespaces with the same addresses. On the first,
 * kube-proxy in iptables mode alone, for the reference: its rules read
 * back once they have settled, with traffic through them. On the next
 * two, drover in iptables mode, then in nftables mode: one full sync,
 * `drover cleanup`, which must leave the node as it found it (but for the
 * empty built-in chains iptables-nft keeps), then kube-proxy: its rules
 * must equal the reference,
 * traffic must reach both endpoints through them, and no table of
 * drover's is left.
 */
import test from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { NFT } from '../../src/modes/nftables/exec.ts';
import { serveApiSocket, startForwarder } from '../../scripts/peers/bench/api-bridge.ts';
import { kubeProxyConfig } from '../../scripts/peers/bench/kube-proxy-config.ts';
import { ProxyProcess } from '../../scripts/peers/bench/processes.ts';
import { createTopology, type Topology } from '../../src/testbed/topology.ts';
import { drover } from '../support/faults.ts';
import { until } from '../support/wait.ts';
import { clusterTestsGate, TIMEOUT_MS } from './support/peers.ts';
import { clusterWorld, eventuallyOn, NODE, reachedOn } from './support/world.ts';

const gate = await clusterTestsGate();
const WEB = '10.96.30.30';
const NODE_PORT = 30080;

if (gate.reason !== undefined) {
  test.skip(`the way back to kube-proxy skipped: ${gate.reason}`, () => {});
} else {
  const { peers } = gate;

  test('after drover cleanup (of iptables mode, of nftables mode), the real kube-proxy in iptables mode programs what it programs on a node drover never ran on', async (t) => {
    t.timeout(TIMEOUT_MS);
    const w = await clusterWorld(peers, { backends: 2 });
    t.teardown(() => w.destroy());
    await w.service('web', { type: 'NodePort', clusterIP: WEB, ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: NODE_PORT }] });
    await w.slice('web', 'web-abcde', [w.ep('b1'), w.ep('b2')]);
    const socket = join(w.dir, 'api.sock');
    const bridge = await serveApiSocket(socket, w.api.state.securePort);
    t.teardown(() => void bridge.close());
    const config = join(w.dir, 'kube-proxy.json');
    await writeFile(config, kubeProxyConfig({ mode: 'iptables', node: NODE, kubeconfig: w.api.state.kubeconfig, clusterCIDR: '10.244.0.0/16' }));

    /** A node as the world's, in namespaces of its own (the same addresses), with a forwarder to the API server. */
    const freshNode = async (): Promise<Topology> => {
      const topo = await createTopology({
        backends: ['b1', 'b2'].map((name) => ({ name, ip: w.topo.backend(name).ip, ports: [8080] })),
        clients: [{ name: 'outside', ip: w.topo.client('outside').ip }],
      });
      t.teardown(() => topo.destroy());
      // kube-proxy runs inside the node's namespace and reaches the API server there through a forwarder.
      const forwarder = await startForwarder(topo.node, w.api.state.securePort, socket);
      t.teardown(() => void forwarder.kill());
      return topo;
    };
    const serves = (topo: Topology, what: string, host: string, port: number) => eventuallyOn(topo, what, host, port, 'b1,b2', 120_000);
    /** The node's iptables rules of both families without counters, and its nftables tables, sorted (their order is the order they were created in). */
    const state = async (topo: Topology): Promise<string> => {
      const save = async (cmd: string) => (await run(cmd, [], { netns: topo.node })).stdout.replace(/^#.*\n/gm, '').replace(/\[\d+:\d+\]/g, '[]');
      const tables = (await run(NFT, ['list', 'tables'], { netns: topo.node })).stdout.split('\n').filter((l) => l !== '').sort();
      return `${await save('iptables-nft-save')}${await save('ip6tables-nft-save')}${tables.join('\n')}\n`;
    };
    /**
     * `state` without what iptables-nft creates with a table's first rule and leaves once the rules are gone:
     * the table's header and COMMIT, its built-in chains with policy ACCEPT, the nftables table of that name.
     */
    const beyondBuiltins = (text: string): string =>
      text
        .split('\n')
        .filter((l) => l !== '' && !/^(?:\*[a-z]+|COMMIT|:(?:PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) ACCEPT \[\]|table ip6? (?:filter|mangle|nat|raw))$/.test(l))
        .join('\n');
    /** Start kube-proxy on `topo`, wait until it serves the Service and its rules have settled (two reads a second apart alike), stop it: those rules. */
    const kubeProxy = async (topo: Topology, label: string): Promise<string> => {
      const proxy = await ProxyProcess.start(topo.node, [peers.kubeProxy, '--config', config], join(w.dir, `kube-proxy-${label.replace(/\W+/g, '-')}.log`));
      try {
        await serves(topo, `kube-proxy (${label}), the ClusterIP`, WEB, 80);
        await serves(topo, `kube-proxy (${label}), the NodePort`, topo.nodeIp, NODE_PORT);
        let settled = '';
        await until(`kube-proxy's rules (${label}) to settle`, async () => {
          const before = await state(topo);
          await new Promise((r) => setTimeout(r, 1000));
          settled = await state(topo);
          return settled === before;
        }, 120_000, 0);
        return settled;
      } catch (err) {
        throw new Error(`${(err as Error).message}; kube-proxy's log ends with:\n${proxy.logTail}`);
      } finally {
        await proxy.stop();
      }
    };

    const reference = await kubeProxy(await freshNode(), 'on a fresh node');
    t.regex(reference, /^-A KUBE-SERVICES .*shop\/web:http cluster IP.* -j KUBE-SVC-/m, 'kube-proxy wrote its iptables layout');
    for (const mode of ['iptables', 'nftables'] as const) {
      const topo = await freshNode();
      const flags = ['--source', 'kubernetes', '--kubeconfig', w.api.state.kubeconfig, '--hostname-override', NODE, '--netns', topo.node, '--iptables-backend', 'nft', '--cluster-cidr', '10.244.0.0/16', '--service-cidr', '10.96.0.0/16', '--state-dir', join(w.dir, `state-${mode}`)];
      const untouched = await state(topo);
      const synced = await drover(['sync', '--once', '--mode', mode, ...flags]);
      t.is(synced.code, 0, synced.stderr);
      t.is(await reachedOn(topo, WEB, 80), 'b1,b2', `drover in ${mode} mode serves the Service`);
      const cleaned = await drover(['cleanup', '--mode', mode, '--netns', topo.node, '--iptables-backend', 'nft']);
      t.is(cleaned.code, 0, cleaned.stderr);
      t.is(beyondBuiltins(await state(topo)), beyondBuiltins(untouched), `drover cleanup leaves the node as drover's ${mode} mode found it, but for empty built-in chains`);
      const after = await kubeProxy(topo, `after drover's ${mode} mode`);
      t.is(after, reference, `after drover's ${mode} mode and its cleanup, kube-proxy's rules are those of a fresh node`);
      t.false(/\bdrover\b/.test(after), 'no table of drover is left');
    }
  });
}
