/**
 * NodePorts on 127.0.0.1 in iptables mode (`--nodeport-localhost`,
 * src/modes/iptables/localhost.ts), end to end through the drover command
 * in a testbed's node namespace: a client process in the node namespace
 * connects to 127.0.0.1:nodePort and reaches a backend in another
 * namespace (masqueraded); route_localnet is set in the node namespace only
 * and put back by cleanup; the anti-martian rule of CVE-2020-8558 is read
 * back and drops a real connection to 127.0.0.0/8 that arrives on a veth.
 */
import test from 'ava';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { connectOnce, probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { LOCALNET_FIREWALL_RULE } from '../../src/modes/shared/kube-chains/localnet.ts';
import { recordPath, ROUTE_LOCALNET } from '../../src/modes/iptables/localhost.ts';
import { DROVER } from '../support/drover-bin.ts';

const unavailable = await testbedUnavailableReason();

const MANIFEST = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.96.0.50
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30090, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: ["10.244.1.2"]
  conditions: {ready: true}
  nodeName: node-b
---
apiVersion: v1
kind: Service
metadata: {name: local, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.96.0.51
  externalTrafficPolicy: Local
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30091, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: local-1, namespace: default, labels: {kubernetes.io/service-name: local}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: ["10.244.1.3"]
  conditions: {ready: true}
  nodeName: node-a
`;

let topo: Topology;
let dir: string;

const drover = (args: string[]) => run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 60_000 });
const common = () => ['--source', join(dir, 'manifests'), '--state-dir', join(dir, 'state'), '--netns', topo.node, '--cluster-cidr', '10.244.0.0/16', '--hostname-override', 'node-a'];
const sysctl = async (netns: string | undefined): Promise<string> =>
  (await run('sysctl', ['-n', ROUTE_LOCALNET], netns === undefined ? {} : { netns })).stdout.trim();
const save = async (table: string): Promise<string> => (await run('iptables-save', ['-t', table], { netns: topo.node })).stdout;

if (unavailable) {
  test.skip(`localhost NodePort tests skipped: ${unavailable}`, () => {});
} else {
  let hostBefore: string;

  test.before(async () => {
    hostBefore = await sysctl(undefined);
    dir = await mkdtemp(join(tmpdir(), 'drover-localhost-'));
    await run('mkdir', ['-p', join(dir, 'manifests'), join(dir, 'state')]);
    await writeFile(join(dir, 'manifests', 'web.yaml'), MANIFEST);
    topo = await createTopology({
      backends: [
        { name: 'b1', ip: '10.244.1.2', ports: [8080] },
        { name: 'b2', ip: '10.244.1.3', ports: [8080] },
      ],
      clients: [{ name: 'outside', ip: '192.168.100.2' }],
    });
  });

  test.after.always(async () => {
    await topo?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test.serial('without the flag: no route_localnet, 127.0.0.1:nodePort is not served', async (t) => {
    const res = await drover(['sync', '--once', ...common()]);
    t.is(res.code, 0, res.stderr);
    t.is(await sysctl(topo.node), '0');
    t.false((await save('filter')).includes('KUBE-FIREWALL'));
    t.true((await save('nat')).includes('-A PREROUTING ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS'));
    const r = await connectOnce(topo, { from: topo.node, host: '127.0.0.1', port: 30090, timeoutMs: 1000 });
    t.deepEqual(r, { ok: false, code: 'ECONNREFUSED' });
  });

  test.serial('with --nodeport-localhost: route_localnet=1 in the node namespace only, the prior value recorded, the anti-martian rule read back', async (t) => {
    const res = await drover(['sync', '--once', '--nodeport-localhost', ...common()]);
    t.is(res.code, 0, res.stderr);
    t.is(await sysctl(topo.node), '1');
    t.is(await sysctl(undefined), hostBefore, "this machine's own route_localnet is untouched");
    t.like(JSON.parse(await readFile(recordPath(topo.node), 'utf8')), { netns: topo.node, prior: '0' });
    const filter = await save('filter');
    t.true(filter.includes(`-A KUBE-FIREWALL ${LOCALNET_FIREWALL_RULE}\n`), filter);
    t.true(filter.includes('-A INPUT -m comment --comment "block incoming localnet connections" -j KUBE-FIREWALL\n'));
    t.true(filter.includes('-A OUTPUT -m comment --comment "block incoming localnet connections" -j KUBE-FIREWALL\n'));
    const nat = await save('nat');
    t.true(nat.includes('-A PREROUTING -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n'));
    t.true(nat.includes('-A OUTPUT -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n'));
    t.false(nat.includes('! -d 127.0.0.0/8'));
  });

  test.serial('a client in the node namespace reaches a backend in another namespace through 127.0.0.1:nodePort, masqueraded', async (t) => {
    for (const [port, backend] of [[30090, 'b1'], [30091, 'b2']] as const) {
      const real = await probe(topo, { from: topo.node, host: '127.0.0.1', port, count: 5, timeoutMs: 1000 });
      t.deepEqual([real.counts, real.errors], [{ [backend]: 5 }, {}], `port ${port}`);
      // Not 127.0.0.1: the backend could not answer it. The node's address on the backends' link.
      t.deepEqual(real.clientsSeen[backend], [topo.gateway], `port ${port}`);
    }
  });

  test.serial('diff and trace see the localhost NodePorts', async (t) => {
    const same = await drover(['diff', '--nodeport-localhost', ...common()]);
    t.is(same.code, 0, same.stdout + same.stderr);
    const other = await drover(['diff', ...common()]);
    t.is(other.code, 1, other.stdout + other.stderr);
    t.regex(other.stdout, /^missing hook nat PREROUTING: ! -d 127\.0\.0\.0\/8 -m comment --comment "kubernetes service nodeports"/m);
    const traced = await drover(['trace', '--netns', topo.node, '--src', '127.0.0.1', '--dst', '127.0.0.1:30090']);
    t.is(traced.code, 0, traced.stderr);
    t.regex(traced.stdout, /10\.244\.1\.2:8080/);
    const json = await drover(['trace', '--netns', topo.node, '--src', '127.0.0.1', '--dst', '127.0.0.1:30090', '--json']);
    const result = JSON.parse(json.stdout) as { outcomes: Array<{ verdict: { kind: string; ip?: string }; masqueraded: boolean }> };
    t.deepEqual(
      result.outcomes.map((o) => [o.verdict.kind, o.verdict.ip, o.masqueraded]),
      [['dnat', '10.244.1.2', true]],
    );
  });

  test.serial('a connection to 127.0.0.0/8 that arrives on a veth is dropped by the anti-martian rule (and refused without it)', async (t) => {
    const client = topo.client('outside');
    // The client sends 127.0.0.2 out of its veth to the node: no local route for 127.0.0.0/8 there, and route_localnet on its side.
    await run('ip', ['route', 'del', 'table', 'local', 'local', '127.0.0.0/8', 'dev', 'lo'], { netns: client.netns });
    await run('sysctl', ['-q', '-w', `${ROUTE_LOCALNET}=1`], { netns: client.netns });
    const dropped = await connectOnce(topo, { from: client.netns, host: '127.0.0.2', port: 9999, timeoutMs: 1500 });
    t.deepEqual(dropped, { ok: false, code: 'ETIMEDOUT' });
    // The same packet without the rule reaches the node's stack, which refuses it: the drop above is the rule's.
    await run('iptables', ['-D', 'KUBE-FIREWALL', '1'], { netns: topo.node });
    const refused = await connectOnce(topo, { from: client.netns, host: '127.0.0.2', port: 9999, timeoutMs: 1500 });
    t.deepEqual(refused, { ok: false, code: 'ECONNREFUSED' });
    const repaired = await drover(['sync', '--once', '--nodeport-localhost', ...common()]);
    t.is(repaired.code, 0, repaired.stderr);
    t.true((await save('filter')).includes(`-A KUBE-FIREWALL ${LOCALNET_FIREWALL_RULE}\n`));
  });

  test.serial('a start without the flag puts route_localnet back; the rule stays until cleanup', async (t) => {
    const off = await drover(['sync', '--once', ...common()]);
    t.is(off.code, 0, off.stderr);
    t.is(await sysctl(topo.node), '0');
    t.false(existsSync(recordPath(topo.node)));
    t.true((await save('filter')).includes(`-A KUBE-FIREWALL ${LOCALNET_FIREWALL_RULE}\n`));
    t.true((await save('nat')).includes('-A PREROUTING ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n'));
    const on = await drover(['sync', '--once', '--nodeport-localhost', ...common()]);
    t.is(on.code, 0, on.stderr);
    t.is(await sysctl(topo.node), '1');
  });

  test.serial('cleanup removes the rule and its jumps and puts route_localnet back', async (t) => {
    const res = await drover(['cleanup', '--netns', topo.node]);
    t.is(res.code, 0, res.stderr);
    t.is(await sysctl(topo.node), '0');
    t.false(existsSync(recordPath(topo.node)));
    t.false((await save('filter')).includes('KUBE-'));
    t.false((await save('nat')).includes('KUBE-'));
    t.is(await sysctl(undefined), hostBefore);
  });

  test.serial("cleanup leaves alone a KUBE-FIREWALL of kubelet's or kube-proxy's (jumped to without drover's comment)", async (t) => {
    await run('iptables', ['-N', 'KUBE-FIREWALL'], { netns: topo.node });
    await run('iptables', ['-A', 'KUBE-FIREWALL', '!', '-s', '127.0.0.0/8', '-d', '127.0.0.0/8', '-m', 'comment', '--comment', 'block incoming localnet connections', '-m', 'conntrack', '!', '--ctstate', 'RELATED,ESTABLISHED,DNAT', '-j', 'DROP'], { netns: topo.node });
    await run('iptables', ['-A', 'INPUT', '-j', 'KUBE-FIREWALL'], { netns: topo.node });
    const res = await drover(['cleanup', '--netns', topo.node]);
    t.is(res.code, 0, res.stderr);
    const filter = await save('filter');
    t.true(filter.includes(`-A KUBE-FIREWALL ${LOCALNET_FIREWALL_RULE}\n`), filter);
    t.true(filter.includes('-A INPUT -j KUBE-FIREWALL\n'));
  });

  test.serial("with route_localnet already 1 and kubelet's jumps to KUBE-FIREWALL, a run with the flag and cleanup leave the anti-martian rule in place", async (t) => {
    // Left by the test before: kubelet's KUBE-FIREWALL and its INPUT jump.
    await run('iptables', ['-A', 'OUTPUT', '-j', 'KUBE-FIREWALL'], { netns: topo.node });
    await run('sysctl', ['-q', '-w', `${ROUTE_LOCALNET}=1`], { netns: topo.node });
    const on = await drover(['sync', '--once', '--nodeport-localhost', ...common()]);
    t.is(on.code, 0, on.stderr);
    t.false(existsSync(recordPath(topo.node)), 'found 1: nothing recorded');
    const res = await drover(['cleanup', '--netns', topo.node]);
    t.is(res.code, 3, res.stderr);
    t.true(res.stderr.includes('drover: filter chain KUBE-FIREWALL was left as it is, rules included: a rule drover does not own still jumps to it: -t filter -A INPUT -j KUBE-FIREWALL\n'), res.stderr);
    t.is(await sysctl(topo.node), '1');
    const filter = await save('filter');
    t.true(filter.includes(`-A KUBE-FIREWALL ${LOCALNET_FIREWALL_RULE}\n`), filter);
    t.true(filter.includes('-A INPUT -j KUBE-FIREWALL\n') && filter.includes('-A OUTPUT -j KUBE-FIREWALL\n'), filter);
    t.false(filter.includes('-m comment --comment "block incoming localnet connections" -j KUBE-FIREWALL'), filter);
    t.false((await save('nat')).includes('KUBE-'));
  });
}
