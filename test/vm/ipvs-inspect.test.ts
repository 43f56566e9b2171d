/**
 * `drover chains` and `diff` with `--mode ipvs` against the real kernel of
 * the guest: a node namespace programmed by `drover sync --once --mode ipvs`
 * (src/testbed topology, echo servers in endpoint namespaces), then
 * inspected by the CLI as a user runs it, inside the namespace.
 *
 * Each `drover` command costs most of a minute under emulation, so this file
 * runs only what needs the CLI on a real IPVS kernel: chains with live
 * connection counters, and diff after drift by hand. Covered elsewhere:
 * `trace --mode ipvs` over the live kernel against real connections, from
 * outside the cluster CIDR, of a virtual server without real servers
 * (ipvs-packet-flow.test.ts) and hairpin from an endpoint of the service
 * (ipvs-datapath.test.ts), each through the driver, and the trace command
 * over fakes in test/unit/inspect-ipvs.test.ts; diff finding no differences
 * after a sync in ipvs-render.test.ts (and the last test here, whose output
 * lists only the two changes made by hand).
 */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdConnection } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import { drover, list, service, slice } from './support/cli.ts';
import { createIpvsTopology, registerIpvsTests } from './support/env.ts';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ports: [8080] },
  { name: 'b3', ip: '10.244.1.4', ports: [8080] },
];
const MANIFESTS = list([
  service('web', '10.96.0.10', 80, 'TCP', {}, 8080),
  slice('web', BACKENDS.map((b) => b.ip), 8080, 'TCP'),
  service('empty', '10.96.0.11', 80, 'TCP', {}, 8080),
]);
const FLAGS = ['--mode', 'ipvs', '--cluster-cidr', '10.244.0.0/16'];

let topo: Topology;
let dir: string;

if (await registerIpvsTests('IPVS inspect tests')) {
  test.before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'drover-ipvs-inspect-'));
    await writeFile(join(dir, 'cluster.json'), MANIFESTS);
    topo = await createIpvsTopology(BACKENDS);
    const sync = await drover(topo.node, ['sync', '--once', '--source', dir, ...FLAGS]);
    if (sync.code !== 0) throw new Error(`drover sync --once --mode ipvs failed: ${sync.stderr}`);
  });

  test.after.always(async () => {
    await topo?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test.serial('chains --mode ipvs shows each virtual server with its real servers, connection counters, kube-ipvs0 and ipset entries', async (t) => {
    // An open connection: its real server counts it as active while chains reads the kernel.
    const held = await holdConnection(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80 });
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
    const lines = res.stdout.split('\n');
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

  test.serial('diff --mode ipvs reports a real server deleted and a virtual server added by hand, exit 1', async (t) => {
    await topo.exec(topo.node, 'ipvsadm', ['-d', '-t', '10.96.0.10:80', '-r', '10.244.1.3:8080']);
    await topo.exec(topo.node, 'ipvsadm', ['-A', '-t', '10.100.0.1:443', '-s', 'rr']);
    const diff = await drover(topo.node, ['diff', '--source', dir, ...FLAGS]);
    t.log(`\n${diff.stdout}`);
    t.deepEqual(
      [diff.code, diff.stdout, diff.stderr],
      [1, 'extra virtual server TCP 10.100.0.1:443: rr\nmissing real server TCP 10.96.0.10:80 -> 10.244.1.3:8080 (default/web:p): weight 1 Masq\n', ''],
    );
  });
}
