/**
 * Stale UDP conntrack entries are deleted after a sync that removes their
 * endpoint, as kube-proxy does: otherwise a UDP flow that keeps its source
 * port follows its conntrack entry to the removed endpoint forever.
 */
import test, { type ExecutionContext } from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { SystemIptables } from '../../src/kernel/iptables/exec.ts';
import { SystemConntrack } from '../../src/conntrack/exec.ts';
import { ipv4Frontends, type Snapshot } from '../../src/model/types.ts';
import { Proxier } from '../../src/proxier/proxier.ts';
import type { Backend } from '../../src/proxier/backend.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { dualSnap, ep, snap, sp } from '../support/snapshots.ts';
import { DualStackIptablesBackend } from '../../src/modes/iptables/dual-stack.ts';
import { loadStatic6Rules, loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';

const unavailable = await testbedUnavailableReason();
const dns = (ips: string[]) =>
  sp('kube-system/dns:dns', '10.96.0.53', 53, ips.map((ip) => ep(`${ip}:53`)), { protocol: 'UDP', type: 'NodePort', frontends: ipv4Frontends('10.96.0.53', 30053) });
/** Where the client sends: the ClusterIP, and the NodePort on the node's address (192.168.100.1, the topology's default). */
const FRONTENDS = [
  { what: 'the ClusterIP', host: '10.96.0.53', port: 53 },
  { what: 'a NodePort', host: '192.168.100.1', port: 30053 },
];

/** UDP datagrams from 20 fixed source ports, one each, from namespace `netns` to `host:port`: each flow gets a conntrack entry NATed to one endpoint. */
async function sendFlows(topo: Topology, netns: string, host: string, port: number): Promise<void> {
  const type = host.includes(':') ? 'udp6' : 'udp4';
  const send = `const d=require('dgram');let n=0;for(let p=40000;p<40020;p++){const s=d.createSocket('${type}');s.bind(p,()=>s.send('q',${port},'${host}',()=>{s.close();if(++n===20)process.exit(0)}))}`;
  await topo.exec(netns, process.execPath, ['-e', send]);
}

/** The node's UDP conntrack entries to `host:port`, "sport endpoint" each, sorted (`-f ipv6` for an IPv6 host). */
async function flowsTo(topo: Topology, host: string, port: number): Promise<string[]> {
  const family = host.includes(':') ? ['-f', 'ipv6'] : [];
  return (await topo.exec(topo.node, 'conntrack', ['-L', ...family, '-p', 'udp', '--orig-dst', host, '--orig-port-dst', String(port)], { allowFail: true })).stdout
    .split('\n')
    .flatMap((l) => {
      const m = new RegExp(`sport=(\\d+) dport=${port} (?:\\[UNREPLIED\\] )?src=(\\S+)`).exec(l);
      return m ? [`${m[1]} ${m[2]}`] : [];
    })
    .sort();
}

/**
 * Sync `first` through `backend` with a proxier that deletes stale UDP
 * entries, send 20 flows from `from` to `host:port`, sync `then` (which
 * drops endpoint `gone` and keeps `kept`): the flows to `gone` lose their
 * entries, those to `kept` keep theirs.
 */
async function staleCase(
  t: ExecutionContext,
  topo: Topology,
  c: { backend: Backend; first: Snapshot; then: Snapshot; from: string; host: string; port: number; kept: string; gone: string },
): Promise<void> {
  let current = c.first;
  const proxier = new Proxier({
    source: { load: async () => ({ snapshot: current }), watch: () => undefined, close: () => undefined },
    backend: c.backend,
    logger: silentLogger(),
    minSyncPeriodMs: 0,
    syncPeriodMs: 60_000,
    conntrack: new SystemConntrack(topo.node),
  });
  await proxier.syncOnce();
  await sendFlows(topo, c.from, c.host, c.port);
  const before = await flowsTo(topo, c.host, c.port);
  t.is(before.length, 20);
  const toGone = before.filter((f) => f.endsWith(` ${c.gone}`));
  t.true(toGone.length > 0 && toGone.length < 20, `${toGone.length} of 20 flows went to ${c.gone}`);
  current = c.then;
  await proxier.syncOnce();
  t.deepEqual(await flowsTo(topo, c.host, c.port), before.filter((f) => f.endsWith(` ${c.kept}`)));
}

if (unavailable) {
  test.skip(`conntrack tests skipped: ${unavailable}`, () => {});
} else {
  for (const fe of FRONTENDS) test(`a UDP flow to a removed endpoint loses its conntrack entry; flows to kept endpoints keep theirs: ${fe.what}`, async (t) => {
    const topo = await createTopology({
      backends: [
        { name: 'd1', ip: '10.244.1.2', ports: [8080] },
        { name: 'd2', ip: '10.244.1.3', ports: [8080] },
      ],
    });
    try {
      await staleCase(t, topo, {
        backend: new IptablesBackend({
          exec: new SystemIptables({ variant: 'nft', netns: topo.node }),
          render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false },
          logger: silentLogger(),
        }),
        first: snap(dns(['10.244.1.2', '10.244.1.3'])),
        then: snap(dns(['10.244.1.2'])),
        from: topo.client().netns,
        ...fe,
        kept: '10.244.1.2',
        gone: '10.244.1.3',
      });
    } finally {
      await topo.destroy();
    }
  });

  for (const fe of [{ what: 'the IPv6 ClusterIP' }, { what: 'an IPv6 NodePort' }]) test(`IPv6: a UDP flow to a removed endpoint loses its conntrack entry (conntrack -f ipv6); flows to kept endpoints keep theirs: ${fe.what}`, async (t) => {
    const topo = await createTopology({
      backends: [
        { name: 'd1', ip: '10.244.1.2', ip6: 'fd00:244:1::2', ports: [8080] },
        { name: 'd2', ip: '10.244.1.3', ip6: 'fd00:244:1::3', ports: [8080] },
      ],
      clients: [{ name: 'outside', ip: '192.168.100.2', ip6: 'fd00:100::2' }],
    });
    try {
      const clusterIP = fe.what.includes('ClusterIP');
      const frontends = { ...ipv4Frontends('10.96.0.53', 30053), clusterIPs: [{ family: 'IPv4' as const, ip: '10.96.0.53' }, { family: 'IPv6' as const, ip: 'fd00:96::53' }] };
      const dual = (ips6: string[]) =>
        dualSnap(
          [sp('kube-system/dns:dns', '10.96.0.53', 53, [ep('10.244.1.2:53')], { protocol: 'UDP', type: 'NodePort', frontends })],
          [sp('kube-system/dns:dns', 'fd00:96::53', 53, ips6.map((ip) => ep(`[${ip}]:53`)), { protocol: 'UDP', type: 'NodePort', frontends })],
        );
      await staleCase(t, topo, {
        backend: new DualStackIptablesBackend({
          IPv4: { exec: new SystemIptables({ variant: 'nft', netns: topo.node }), render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, statics: loadStaticRules() },
          IPv6: {
            exec: new SystemIptables({ variant: 'nft', family: 'IPv6', netns: topo.node }),
            render: { clusterCIDR: 'fd00:244::/32', masqueradeAll: false, family: 'IPv6' },
            statics: loadStatic6Rules(),
          },
          logger: silentLogger(),
        }),
        first: dual(['fd00:244:1::2', 'fd00:244:1::3']),
        then: dual(['fd00:244:1::2']),
        from: topo.client('outside').netns,
        host: clusterIP ? 'fd00:96::53' : topo.ipv6.nodeIp,
        port: clusterIP ? 53 : 30053,
        kept: 'fd00:244:1::2',
        gone: 'fd00:244:1::3',
      });
    } finally {
      await topo.destroy();
    }
  });
}
