/**
 * Dual-stack in nftables mode with real packets: one Service with an IPv6
 * and an IPv4 ClusterIP (test/fixtures/dualstack/services.yaml), backends
 * with an address of each family, in throw-away namespaces (the topology
 * of test/kernel/dualstack.test.ts). Connections to each ClusterIP, and to
 * the IPv6 NodePort, reach the backends through that family; `table ip6
 * drover` reads back as written (a second full sync writes nothing); a
 * failure of one family's table leaves the other working; ClientIP
 * affinity holds for IPv6 frontends (its record rules go over netlink,
 * src/modes/nftables/affinity-rule.ts) and its entries expire; `trace
 * --kernel` of an IPv6 probe (ClusterIP, NodePort) agrees with the
 * evaluator and leaves `table ip6 drover` as it was.
 */
import test from 'ava';
import type { ServicePort, Snapshot } from '../../src/model/types.ts';
import { DualStackNftablesBackend } from '../../src/modes/nftables/dual-stack.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { FamilySyncError } from '../../src/modes/shared/dual-stack.ts';
import { run } from '../../src/kernel/exec.ts';
import { probe } from '../../src/testbed/probe.ts';
import { testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { CLUSTER_CIDRS, dualStackWorld } from '../support/dualstack.ts';
import { buildFrom } from '../unit/model-helpers.ts';
import { isNftablesDetail } from '../../src/modes/nftables/sync-detail.ts';
import { DROVER } from '../support/drover-bin.ts';
import { until } from '../support/wait.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
let topo: Topology;
let snapshot: Snapshot;

/** The dual-stack nftables backend in the node namespace (nft -f only: a netlink socket acts in its own process's namespace); `ipv6Netns` overrides where the IPv6 table is written. */
function dualStack(ipv6Netns = topo.node): DualStackNftablesBackend {
  return new DualStackNftablesBackend({
    IPv4: { nft: new SystemNft({ netns: topo.node }), render: { clusterCIDR: CLUSTER_CIDRS.IPv4, masqueradeAll: false }, frontends: { nodePortIPs: [topo.nodeIp] } },
    IPv6: {
      nft: new SystemNft({ netns: ipv6Netns, family: 'IPv6' }),
      render: { clusterCIDR: CLUSTER_CIDRS.IPv6, masqueradeAll: false, family: 'IPv6' },
      frontends: { nodePortIPs: [topo.ipv6.nodeIp], family: 'IPv6' },
    },
    logger: silentLogger(),
  });
}

/** `s` with ClientIP affinity of `seconds` on service port default/web:http, in both families. */
function withAffinity(s: Snapshot, seconds: number): Snapshot {
  const set = (m: ReadonlyMap<string, ServicePort> | undefined) => {
    if (!m) return undefined;
    const out = new Map(m);
    const sp = out.get('default/web:http');
    if (sp) out.set(sp.key, { ...sp, sessionAffinity: { timeoutSeconds: seconds } });
    return out;
  };
  return { ...s, services: set(s.services)!, ...(s.ipv6Services ? { ipv6Services: set(s.ipv6Services)! } : {}) };
}

/** The entries of map `ip6 drover affinity` as the kernel lists them: `client . frontend` → endpoint and timeout (s). */
async function affinityEntries(): Promise<Map<string, { endpoint: string; timeout: number | undefined }>> {
  const out = await topo.exec(topo.node, '/usr/sbin/nft', ['-j', 'list', 'map', 'ip6', 'drover', 'affinity']);
  const doc = JSON.parse(out.stdout) as { nftables: { map?: { elem?: [unknown, unknown][] } }[] };
  const text = (v: unknown): string => (typeof v === 'object' && v !== null && 'concat' in v ? (v as { concat: unknown[] }).concat.map(String).join(' . ') : String(v));
  const entries = new Map<string, { endpoint: string; timeout: number | undefined }>();
  for (const [k, v] of doc.nftables.find((x) => x.map)?.map?.elem ?? []) {
    const elem = (k as { elem?: { val: unknown; timeout?: number } }).elem;
    entries.set(text(elem ? elem.val : k), { endpoint: text(v), timeout: elem?.timeout });
  }
  return entries;
}

/** Chains and rules (by handle and comment) of `table ip6 drover`, as nft lists them. */
async function ip6Rules(): Promise<string[]> {
  const r = await topo.exec(topo.node, '/usr/sbin/nft', ['-j', 'list', 'table', 'ip6', 'drover']);
  const items = (JSON.parse(r.stdout) as { nftables: Record<string, { name?: string; chain?: string; comment?: string; handle?: number }>[] }).nftables;
  return items.flatMap((i) => (i.chain ? [`chain ${i.chain.name}`] : i.rule ? [`rule ${i.rule.chain} ${i.rule.handle} ${i.rule.comment}`] : []));
}

if (unavailable) {
  test.skip(`nftables dual-stack kernel tests skipped: ${unavailable}`, () => {});
} else {
  test.before(async () => {
    ({ snapshot, topo } = await dualStackWorld());
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('connections to the IPv6 and the IPv4 ClusterIP of one Service, and to the IPv6 NodePort, reach backends of that family', async (t) => {
    const first = await dualStack().sync(snapshot, FULL);
    t.true(first.written.chain! > 0);
    const tables = await topo.exec(topo.node, '/usr/sbin/nft', ['list', 'tables']);
    t.is(tables.stdout, 'table ip drover\ntable ip6 drover\n');
    const from = topo.client('outside').netns;
    const v6 = await probe(topo, { from, host: 'fd00:96::10', port: 80, count: 30 });
    t.deepEqual(v6.errors, {});
    t.deepEqual(Object.keys(v6.counts).sort(), ['b1', 'b2']);
    t.true(v6.results.every((r) => r.ok && r.reply.ip.includes(':')), 'answered on the backends IPv6 addresses');
    t.deepEqual([...new Set(Object.values(v6.clientsSeen).flat())], [topo.ipv6.gateway], 'from outside fd00:244::/48: masqueraded to the node');
    const v4 = await probe(topo, { from, host: '10.96.0.10', port: 80, count: 30 });
    t.deepEqual(v4.errors, {});
    t.deepEqual(Object.keys(v4.counts).sort(), ['b1', 'b2']);
    t.true(v4.results.every((r) => r.ok && !r.reply.ip.includes(':')), 'answered on the backends IPv4 addresses');
    const only6 = await probe(topo, { from, host: 'fd00:96::20', port: 80, count: 5 });
    t.deepEqual(only6.counts, { b3: 5 });
    const nodePort = await probe(topo, { from, host: topo.ipv6.nodeIp, port: 30080, count: 10 });
    t.deepEqual(nodePort.errors, {});
    t.deepEqual(Object.keys(nodePort.counts).sort(), ['b1', 'b2']);
  });

  test.serial('both tables read back as written: a second full sync (a restart adopting them) writes nothing', async (t) => {
    const again = await dualStack().sync(snapshot, FULL);
    t.deepEqual([again.written, again.deleted, again.transactions], [{ 'set entry': 0, set: 0, chain: 0 }, { 'set entry': 0, set: 0, chain: 0 }, 0]);
  });

  test.serial('with external and LoadBalancer IPs and source ranges of both families, the IPv6 interval set reads back as written too', async (t) => {
    const lb = (await buildFrom(['test/fixtures/dualstack/services.yaml', 'test/fixtures/dualstack/nft-lb.yaml'])).snapshot;
    const withNode = { ...lb, node: { name: 'node-a', addresses: [{ type: 'InternalIP' as const, address: topo.ipv6.nodeIp }] } };
    await dualStack().sync(withNode, FULL);
    const allow = await topo.exec(topo.node, '/usr/sbin/nft', ['list', 'set', 'ip6', 'drover', 'firewall-allow']);
    t.regex(allow.stdout, /2001:db8:51::40 \. tcp \. 443 \. fd00:100::\/64/);
    const again = await dualStack().sync(withNode, FULL);
    t.deepEqual([again.written, again.deleted], [{ 'set entry': 0, set: 0, chain: 0 }, { 'set entry': 0, set: 0, chain: 0 }]);
    await dualStack().sync(snapshot, FULL);
  });

  test.serial('diff, chains and trace cover table ip6 drover', async (t) => {
    const drover = (args: string[]) => run(process.execPath, [DROVER, ...args, '--mode', 'nftables', '--netns', topo.node], { allowFail: true, timeoutMs: 60_000 });
    const source = ['--source', 'test/fixtures/dualstack/services.yaml', '--cluster-cidr', '10.244.0.0/16,fd00:244::/48', '--nodeport-addresses', `${topo.nodeIp}/32,${topo.ipv6.nodeIp}/128`];
    const diff = await drover(['diff', ...source]);
    t.is(diff.stdout, 'table ip drover:\nno differences\ntable ip6 drover:\nno differences\n', diff.stderr);
    const chains = await drover(['chains']);
    t.regex(chains.stdout, /fd00:96::10 \. tcp \. 80/);
    t.regex(chains.stdout, /10\.96\.0\.10 \. tcp \. 80/);
    const traced = await drover(['trace', '--src', 'fd00:100::2', '--dst', '[fd00:96::10]:80']);
    t.is(traced.code, 0, traced.stderr);
    t.regex(traced.stdout, /ip6 drover pick/);
    t.regex(traced.stdout, /verdict: DNAT to one of 2 endpoints, masqueraded\n/);
  });

  test.serial('drift in table ip6 drover is repaired by the next full sync', async (t) => {
    const backend = dualStack();
    await backend.sync(snapshot, FULL);
    await topo.exec(topo.node, '/usr/sbin/nft', ['delete', 'element', 'ip6', 'drover', 'service-ips', '{ fd00:96::10 . tcp . 80 }']);
    const r = await backend.sync(snapshot, FULL);
    t.deepEqual(r.written, { 'set entry': 1, set: 0, chain: 0 });
    const v6 = await probe(topo, { from: topo.client('outside').netns, host: 'fd00:96::10', port: 80, count: 5 });
    t.deepEqual(v6.errors, {});
  });

  test.serial('a failing IPv6 table never stops the IPv4 sync (kube-proxy issue 73157)', async (t) => {
    // The IPv6 half writes into a namespace that does not exist: every nft command for it fails.
    const backend = dualStack(`${topo.node}-missing`);
    const without = new Map(snapshot.services);
    without.delete('default/empty:http');
    const err = await t.throwsAsync(backend.sync({ ...snapshot, services: without }, FULL), { instanceOf: FamilySyncError });
    t.deepEqual(err!.failures.map((f) => f.family), ['IPv6']);
    // The IPv4 change was written: the empty Service's frontend is gone from the IPv4 table.
    const v4set = await topo.exec(topo.node, '/usr/sbin/nft', ['list', 'set', 'ip', 'drover', 'no-endpoints']);
    t.false(v4set.stdout.includes('10.96.0.30'));
    const v4 = await probe(topo, { from: topo.client('outside').netns, host: '10.96.0.10', port: 80, count: 5 });
    t.deepEqual(v4.errors, {});
    const v6 = await probe(topo, { from: topo.client('outside').netns, host: 'fd00:96::10', port: 80, count: 5 });
    t.deepEqual(v6.errors, {}, 'the IPv6 table written before still serves');
  });

  test.serial('IPv6 ClientIP affinity: one client keeps its endpoint through the ClusterIP and the NodePort; the entry expires after the timeout; a new timeout takes effect at the next sync', async (t) => {
    const backend = dualStack();
    // 10 s: each connection refreshes its entry, and a busy machine may leave seconds between two of them.
    await backend.sync(withAffinity(snapshot, 10), FULL);
    const rules = await topo.exec(topo.node, '/usr/sbin/nft', ['list', 'chain', 'ip6', 'drover', 'affinity-prerouting']);
    t.regex(rules.stdout, /@affinity-10 update @affinity \{ ip6 saddr \. ct original ip6 daddr \. meta l4proto \. ct original proto-dst timeout 10s : ip6 daddr \. tcp dport \} comment "tcp affinity of 10 s"/);
    const from = topo.client('outside').netns;
    // The kernel's entries (client . frontend -> the endpoint that answered), each read right after its frontend's
    // connections: the next probe is a process of its own, whose start can take longer than the timeout.
    const viaClusterIP = await probe(topo, { from, host: 'fd00:96::10', port: 80, count: 20 });
    const clusterIPEntry = (await affinityEntries()).get(`fd00:100::2 . fd00:96::10 . tcp . 80`);
    t.deepEqual(viaClusterIP.errors, {});
    t.is(Object.keys(viaClusterIP.counts).length, 1, `one endpoint for all 20 connections: ${JSON.stringify(viaClusterIP.counts)}`);
    const viaNodePort = await probe(topo, { from, host: topo.ipv6.nodeIp, port: 30080, count: 20 });
    const nodePortEntry = (await affinityEntries()).get(`fd00:100::2 . ${topo.ipv6.nodeIp} . tcp . 30080`);
    t.deepEqual(viaNodePort.errors, {});
    t.is(Object.keys(viaNodePort.counts).length, 1, `one endpoint for all 20 connections: ${JSON.stringify(viaNodePort.counts)}`);
    const endpointOf = (counts: Record<string, number>) => `${topo.backend(Object.keys(counts)[0]!).ip6} . 8080`;
    t.is(clusterIPEntry?.endpoint, endpointOf(viaClusterIP.counts));
    t.is(nodePortEntry?.endpoint, endpointOf(viaNodePort.counts));
    t.is(clusterIPEntry?.timeout, 10);
    // No new connection for longer than the timeout: the entries expire, so the next connection draws its endpoint again.
    await until('the affinity entries to expire', async () => (await affinityEntries()).size === 0, 60_000, 250);
    t.deepEqual([...(await affinityEntries()).keys()], [], 'the affinity entries expired');
    // A new timeout, in a partial sync: the entries recorded from now on last 30 s.
    const r = await backend.sync(withAffinity(snapshot, 30), { full: false, changed: new Set(['default/web:http']) });
    t.true(isNftablesDetail(r.detail) && r.detail.structural);
    const again = await probe(topo, { from, host: 'fd00:96::10', port: 80, count: 5 });
    t.deepEqual(again.errors, {});
    t.is(Object.keys(again.counts).length, 1);
    t.is((await affinityEntries()).get(`fd00:100::2 . fd00:96::10 . tcp . 80`)?.timeout, 30);
    // Back to the fixture (no affinity): the next full sync removes the sets and the record rules.
    await backend.sync(snapshot, FULL);
    const after = await topo.exec(topo.node, '/usr/sbin/nft', ['list', 'chain', 'ip6', 'drover', 'affinity-prerouting']);
    t.notRegex(after.stdout, /affinity of/);
  });

  test.serial('trace --kernel of IPv6 probes: the kernel walks table ip6 drover as the evaluator does, for the ClusterIP and the NodePort, and the table is left as it was', async (t) => {
    await dualStack().sync(snapshot, FULL);
    const before = await ip6Rules();
    const outside = topo.client('outside');
    const drover = (dst: string, ...more: string[]) =>
      run(process.execPath, [DROVER, 'trace', '--src', 'fd00:100::2', '--dst', dst, '--kernel', '--probe-from', outside.netns, ...more, '--mode', 'nftables', '--netns', topo.node], { allowFail: true, timeoutMs: 120_000 });
    const endpoints = ['[fd00:244:1::2]:8080', '[fd00:244:1::3]:8080'];
    for (const dst of ['[fd00:96::10]:80', `[${topo.ipv6.nodeIp}]:30080`]) {
      const r = await drover(dst);
      t.is(r.code, 0, `${dst}: ${r.stdout}\n${r.stderr}`);
      const kernel = r.stdout.slice(r.stdout.indexOf('\nkernel: ') + 1);
      t.regex(kernel, new RegExp(`^kernel: one tcp probe \\[fd00:100::2\\]:\\d+ -> \\${dst.replace(/\]/, '\\]')}, sent from namespace ${outside.netns} \\(connected\\)`));
      t.regex(kernel, /\nip6 drover pick\n {2}rule \d+ +handle \d+ +accept {2}comment "one of 2 endpoints, any protocol"\n/);
      const endpoint = /\nkernel verdict: DNAT to (\S+), masqueraded\n/.exec(kernel)?.[1];
      t.true(endpoint !== undefined && endpoints.includes(endpoint), `${dst}: the kernel DNATs to an IPv6 endpoint: ${endpoint}`);
      t.regex(kernel, /\nMATCH: the kernel took the evaluator's branch: DNAT to \S+, masqueraded \(50\.00% of new connections\)\n$/);
      t.deepEqual(await ip6Rules(), before, 'the trace chains are gone and nothing else changed');
    }
    const json = await drover('[fd00:96::10]:80', '--json');
    const out = JSON.parse(json.stdout) as { match: boolean; kernel: { path: { steps: { table: string }[] } } };
    t.true(out.match);
    t.true(out.kernel.path.steps.some((s) => s.table === 'ip6 drover'));
  });

  test.serial('cleanup deletes table ip drover and table ip6 drover, nothing else', async (t) => {
    await topo.exec(topo.node, '/usr/sbin/nft', ['add', 'table', 'ip6', 'other']);
    await dualStack().cleanup();
    const tables = await topo.exec(topo.node, '/usr/sbin/nft', ['list', 'tables']);
    t.is(tables.stdout, 'table ip6 other\n');
  });
}
