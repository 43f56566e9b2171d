/**
 * `drover chains`, `trace` and `diff` with `--mode ipvs` against the real
 * kernel of the guest, IPv4 and IPv6: one dual-stack node namespace
 * programmed by one `drover sync --once --mode ipvs` (src/testbed topology,
 * echo servers in endpoint namespaces, b1 and b2 with IPv6 addresses too)
 * from manifests with an IPv4 Service, an IPv4 Service without endpoints
 * and an IPv6-only NodePort Service, then inspected by the CLI as a user
 * runs it, inside the namespace.
 *
 * Each `drover` command costs seconds to tens of seconds under emulation,
 * so this file runs only what needs the CLI on a real IPVS kernel: chains
 * with live connection counters; trace of the IPv6 ClusterIP against real
 * connections (which backends answer, which client address they see; the
 * trace of the NodePort on the node's IPv6 address is in
 * test/unit/inspect-ipvs-ipv6.test.ts over fakes, and real connections to
 * it in ipvs-ipv6.test.ts and ipvs-frontends6.test.ts); and one diff after
 * drift by hand in both families (a real server deleted and a virtual
 * server added with ipvsadm, an ip6tables rule deleted): its output lists
 * those three changes and nothing else, so no other difference was there
 * after the sync. Covered elsewhere: `trace --mode ipvs` over the live
 * kernel against real IPv4 connections, from outside the cluster CIDR, of a
 * virtual server without real servers (ipvs-packet-flow.test.ts) and
 * hairpin from an endpoint of the service (ipvs-datapath.test.ts), each
 * through the driver, and the trace command over fakes in
 * test/unit/inspect-ipvs.test.ts; diff finding no differences after a sync
 * in ipvs-render.test.ts and, for IPv6, test/unit/inspect-ipvs-ipv6.test.ts.
 */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ipvsTraceFormat } from '../../src/modes/ipvs/trace.ts';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import type { TraceResult } from '../../src/inspect/trace.ts';
import { holdConnection, probe } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import { drover, list, service, slice } from './support/cli.ts';
import { createIpvsTopology, PROBE_TIMEOUT_MS, registerIpvsTests } from './support/env.ts';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ip6: 'fd00:244:1::2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ip6: 'fd00:244:1::3', ports: [8080] },
  { name: 'b3', ip: '10.244.1.4', ports: [8080] },
];
const BACKENDS6 = BACKENDS.filter((b) => b.ip6 !== undefined);
const CLUSTER_IP6 = 'fd00:96::10';
const MANIFESTS = list([
  service('web', '10.96.0.10', 80, 'TCP', {}, 8080),
  slice('web', BACKENDS.map((b) => b.ip), 8080, 'TCP'),
  service('empty', '10.96.0.11', 80, 'TCP', {}, 8080),
  // An IPv6-only NodePort Service default/web6 and its IPv6 EndpointSlice.
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
    endpoints: BACKENDS6.map((b) => ({ addresses: [b.ip6], conditions: { ready: true } })),
    ports: [{ name: 'p', port: 8080, protocol: 'TCP' }],
  },
]);
const FLAGS = ['--mode', 'ipvs', '--cluster-cidr', '10.244.0.0/16,fd00:244::/48'];

let topo: Topology;
let dir: string;

if (await registerIpvsTests('IPVS inspect tests')) {
  test.before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'drover-ipvs-inspect-'));
    await writeFile(join(dir, 'cluster.json'), MANIFESTS);
    topo = await createIpvsTopology(BACKENDS, { ipv6: true });
    const sync = await drover(topo.node, ['sync', '--once', '--source', dir, ...FLAGS]);
    if (sync.code !== 0) throw new Error(`drover sync --once --mode ipvs failed: ${sync.stderr}`);
  });

  test.after.always(async () => {
    await topo?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test.serial('chains --mode ipvs shows each virtual server with its real servers, connection counters, kube-ipvs0 and ipset entries', async (t) => {
    // An open connection: its real server counts it as active while chains reads the kernel.
    const held = await holdConnection(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, timeoutMs: PROBE_TIMEOUT_MS });
    let res: Awaited<ReturnType<typeof drover>>;
    let busy: string;
    try {
      t.true(held.first.ok);
      busy = held.first.ok ? topo.backend(held.first.reply.backend).ip : '';
      res = await drover(topo.node, ['chains', '--mode', 'ipvs', '--source', dir]);
    } finally {
      await held.close();
    }
    t.is(res.code, 0, res.stderr);
    t.log(`\n${res.stdout}`);
    // The IPv4 Services' sections: each starts with "# NAMESPACE/NAME:PORT" and ends with an empty line.
    const sections = res.stdout.split(/(?<=\n\n)/);
    t.true(sections.some((s) => s.startsWith('# default/web6:p ')), 'the IPv6 Service is listed too');
    const lines = sections.filter((s) => !s.startsWith('# default/web6:p ')).join('').replace(/\n+$/, '\n').split('\n');
    const realServer = (l: string) => l.startsWith('  -> 10.');
    // The counters depend on the connections above, which IPVS keeps for a while after they close: only the open one is certain.
    const counters = new Map(lines.filter(realServer).map((l) => l.trim().split(/\s+/)).map((w) => [w[1]!, { active: Number(w[4]), inactive: Number(w[5]) }]));
    t.true((counters.get(`${busy}:8080`)?.active ?? 0) >= 1, `the open connection to ${busy} is active`);
    t.deepEqual(
      lines.map((l) => (realServer(l) ? l.trim().split(/\s+/).filter((_, i) => i !== 4 && i !== 5).join(' ') : l)),
      [
        '# default/empty:p (virtual server TCP 10.96.0.11:80)',
        'TCP 10.96.0.11:80 rr (flags: hashed)',
        '  kube-ipvs0: 10.96.0.11/32 bound',
        '  KUBE-CLUSTER-IP: 10.96.0.11,tcp:80',
        '  no real servers: IPVS refuses connections to it',
        '',
        '# default/web:p (virtual server TCP 10.96.0.10:80)',
        'TCP 10.96.0.10:80 rr (flags: hashed)',
        '  kube-ipvs0: 10.96.0.10/32 bound',
        '  KUBE-CLUSTER-IP: 10.96.0.10,tcp:80',
        '  -> real server      forward  weight  active  inactive  KUBE-LOOP-BACK',
        '-> 10.244.1.2:8080 Masq 1 10.244.1.2,tcp:8080,10.244.1.2',
        '-> 10.244.1.3:8080 Masq 1 10.244.1.3,tcp:8080,10.244.1.3',
        '-> 10.244.1.4:8080 Masq 1 10.244.1.4,tcp:8080,10.244.1.4',
        '',
      ],
    );
  });

  test.serial('trace --mode ipvs of the IPv6 ClusterIP names exactly the real servers real IPv6 connections reach, and their masquerade', async (t) => {
    const client = topo.client('outside');
    const res = await drover(topo.node, ['trace', '--mode', 'ipvs', '--src', client.ip6!, '--dst', `[${CLUSTER_IP6}]:80`, '--json']);
    t.is(res.code, 0, res.stderr);
    const result = JSON.parse(res.stdout) as TraceResult;
    t.log(`\n${formatTrace(result, ipvsTraceFormat)}`);
    t.deepEqual(result.packet, { src: client.ip6!, dst: CLUSTER_IP6, dport: 80, proto: 'tcp' });
    t.is(result.origin, 'outside');
    const real = await probe(topo, { from: client.netns, host: CLUSTER_IP6, port: 80, count: 20, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(real.errors, {});
    const reached = Object.keys(real.counts).map((n) => `[${BACKENDS6.find((b) => b.name === n)!.ip6}]:8080`).sort();
    const traced = result.outcomes.flatMap((o) => (o.verdict.kind === 'dnat' ? [`[${o.verdict.ip}]:${o.verdict.port}`] : [])).sort();
    t.deepEqual(reached, traced);
    t.deepEqual(reached, BACKENDS6.map((b) => `[${b.ip6}]:8080`));
    t.deepEqual(result.outcomes.map((o) => o.probability), [0.5, 0.5]);
    for (const o of result.outcomes) {
      if (o.verdict.kind !== 'dnat') continue;
      const name = BACKENDS6.find((b) => b.ip6 === (o.verdict as { ip: string }).ip)!.name;
      // Masqueraded: the backend sees the node's IPv6 address on its link.
      t.deepEqual(real.clientsSeen[name], [o.masqueraded ? topo.ipv6.gateway : client.ip6], `${name}: masquerade verdict ${o.masqueraded}`);
    }
  });

  test.serial('diff --mode ipvs reports a real server deleted and a virtual server added by hand, and an ip6tables rule deleted by hand as a missing rule of "nat (IPv6)", exit 1', async (t) => {
    await topo.exec(topo.node, 'ipvsadm', ['-d', '-t', '10.96.0.10:80', '-r', '10.244.1.3:8080']);
    await topo.exec(topo.node, 'ipvsadm', ['-A', '-t', '10.100.0.1:443', '-s', 'rr']);
    const save = (await topo.exec(topo.node, 'ip6tables-save', ['-t', 'nat'])).stdout.split('\n');
    const rules = save.filter((l) => l.startsWith('-A KUBE-SERVICES '));
    const at = rules.findIndex((l) => l.includes('KUBE-6-CLUSTER-IP'));
    t.true(at >= 0, save.join('\n'));
    await topo.exec(topo.node, 'ip6tables', ['-t', 'nat', '-D', 'KUBE-SERVICES', String(at + 1)]);
    const diff = await drover(topo.node, ['diff', '--source', dir, ...FLAGS]);
    t.log(`\n${diff.stdout}`);
    // The IPv4 pass, then the IPv6 one.
    t.deepEqual(
      [diff.code, diff.stdout, diff.stderr],
      [
        1,
        'extra virtual server TCP 10.100.0.1:443: rr\n' +
          'missing real server TCP 10.96.0.10:80 -> 10.244.1.3:8080 (default/web:p): weight 1 Masq\n' +
          `missing rule nat (IPv6) KUBE-SERVICES: ${rules[at]!.slice('-A KUBE-SERVICES '.length)}\n`,
        '',
      ],
    );
  });
}
