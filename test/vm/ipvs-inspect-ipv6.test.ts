/**
 * `drover trace --mode ipvs` and `drover diff --mode ipvs` for IPv6 against
 * the real kernel of the guest: a node namespace programmed by `drover sync
 * --once --mode ipvs` with an IPv6 NodePort Service (src/testbed topology,
 * echo servers with IPv6 addresses in endpoint namespaces), then inspected
 * by the CLI inside the namespace. The trace of the IPv6 ClusterIP is
 * checked against real connections (which backends answer, which client
 * address they see; the trace of the NodePort on the node's IPv6 address is
 * in test/unit/inspect-ipvs-ipv6.test.ts over fakes, and real connections
 * to it in ipvs-ipv6.test.ts and ipvs-frontends6.test.ts); the
 * diff against an ip6tables rule deleted by hand (its output lists that rule
 * and nothing else, so no other difference was there after the sync; a
 * separate "no differences" diff is in test/unit/inspect-ipvs-ipv6.test.ts,
 * over fakes, and each `drover` command costs most of a minute in the guest).
 */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ipvsTraceFormat } from '../../src/modes/ipvs/trace.ts';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import type { TraceResult } from '../../src/inspect/trace.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, type Topology } from '../../src/testbed/topology.ts';
import { drover, list } from './support/cli.ts';
import { registerIpvsTests } from './support/env.ts';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ip6: 'fd00:244:1::2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ip6: 'fd00:244:1::3', ports: [8080] },
];
const CLUSTER_IP6 = 'fd00:96::10';
/** An IPv6-only NodePort Service default/web6 and its IPv6 EndpointSlice. */
const MANIFESTS = list([
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web6', namespace: 'default' },
    spec: { type: 'NodePort', ipFamilies: ['IPv6'], clusterIP: CLUSTER_IP6, clusterIPs: [CLUSTER_IP6], ports: [{ name: 'p', port: 80, targetPort: 8080, nodePort: 30080, protocol: 'TCP' }] },
  },
  {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'web6-abc', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web6' } },
    addressType: 'IPv6',
    endpoints: BACKENDS.map((b) => ({ addresses: [b.ip6], conditions: { ready: true } })),
    ports: [{ name: 'p', port: 8080, protocol: 'TCP' }],
  },
]);
const FLAGS = ['--mode', 'ipvs', '--cluster-cidr', '10.244.0.0/16,fd00:244::/48'];

let topo: Topology;
let dir: string;

if (await registerIpvsTests('IPVS IPv6 inspect tests')) {
  test.before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'drover-ipvs-inspect6-'));
    await writeFile(join(dir, 'cluster.json'), MANIFESTS);
    topo = await createTopology({ backends: BACKENDS, clients: [{ name: 'outside', ip: '192.168.100.2', ip6: 'fd00:100::2' }], readyTimeoutMs: 120_000 });
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv6.icmp.ratelimit=0']);
    const sync = await drover(topo.node, ['sync', '--once', '--source', dir, ...FLAGS]);
    if (sync.code !== 0) throw new Error(`drover sync --once --mode ipvs failed: ${sync.stderr}`);
  });

  test.after.always(async () => {
    await topo?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const cases = [{ what: 'the IPv6 ClusterIP', host: () => CLUSTER_IP6, port: 80 }];
  for (const c of cases) {
    test.serial(`trace --mode ipvs of ${c.what} names exactly the real servers real IPv6 connections reach, and their masquerade`, async (t) => {
      const client = topo.client('outside');
      const res = await drover(topo.node, ['trace', '--mode', 'ipvs', '--src', client.ip6!, '--dst', `[${c.host()}]:${c.port}`, '--json']);
      t.is(res.code, 0, res.stderr);
      const result = JSON.parse(res.stdout) as TraceResult;
      t.log(`\n${formatTrace(result, ipvsTraceFormat)}`);
      t.deepEqual(result.packet, { src: client.ip6!, dst: c.host(), dport: c.port, proto: 'tcp' });
      t.is(result.origin, 'outside');
      const real = await probe(topo, { from: client.netns, host: c.host(), port: c.port, count: 20, timeoutMs: 2000 });
      t.deepEqual(real.errors, {});
      const reached = Object.keys(real.counts).map((n) => `[${BACKENDS.find((b) => b.name === n)!.ip6}]:8080`).sort();
      const traced = result.outcomes.flatMap((o) => (o.verdict.kind === 'dnat' ? [`[${o.verdict.ip}]:${o.verdict.port}`] : [])).sort();
      t.deepEqual(reached, traced);
      t.deepEqual(reached, BACKENDS.map((b) => `[${b.ip6}]:8080`));
      t.deepEqual(result.outcomes.map((o) => o.probability), [0.5, 0.5]);
      for (const o of result.outcomes) {
        if (o.verdict.kind !== 'dnat') continue;
        const name = BACKENDS.find((b) => b.ip6 === (o.verdict as { ip: string }).ip)!.name;
        // Masqueraded: the backend sees the node's IPv6 address on its link.
        t.deepEqual(real.clientsSeen[name], [o.masqueraded ? topo.ipv6.gateway : client.ip6], `${name}: masquerade verdict ${o.masqueraded}`);
      }
    });
  }

  test.serial('diff --mode ipvs reports an ip6tables rule deleted by hand as a missing rule of "nat (IPv6)", exit 1', async (t) => {
    const save = (await topo.exec(topo.node, 'ip6tables-save', ['-t', 'nat'])).stdout.split('\n');
    const rules = save.filter((l) => l.startsWith('-A KUBE-SERVICES '));
    const at = rules.findIndex((l) => l.includes('KUBE-6-CLUSTER-IP'));
    t.true(at >= 0, save.join('\n'));
    await topo.exec(topo.node, 'ip6tables', ['-t', 'nat', '-D', 'KUBE-SERVICES', String(at + 1)]);
    const diff = await drover(topo.node, ['diff', '--source', dir, ...FLAGS]);
    t.log(`\n${diff.stdout}`);
    t.deepEqual([diff.code, diff.stdout, diff.stderr], [1, `missing rule nat (IPv6) KUBE-SERVICES: ${rules[at]!.slice('-A KUBE-SERVICES '.length)}\n`, '']);
  });
}
