/**
 * The benchmark's nftables harness without a kernel: the exact payloads of
 * its baselines for one endpoint removed and added back (the netlink batch,
 * the nft script, kube-proxy's transaction), the whole table re-sent, and
 * its read-back checks on `nft -j list table ip drover` as the kernel
 * printed it (test/fixtures/nftables/bench-*.json, captured from a real
 * table in a throw-away namespace after drover's full sync of the base
 * state, and after its partial sync of the endpoint removed).
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { iterationChanges, type ClockService } from '../../src/bench/changes.ts';
import { BENCH_CLUSTER_CIDR, benchSnapshot, clockServicePort, type RealEndpoint } from '../../src/bench/synth.ts';
import { nftablesHarness } from '../../src/bench/modes/nftables/harness.ts';
import { hash8, kpService, kubeProxyChange, kubeProxyTableScript } from '../../src/bench/modes/nftables/kube-proxy.ts';
import { minimalNftOps, wholeTableScript } from '../../src/bench/modes/nftables/payloads.ts';
import { desiredFrontends } from '../../src/modes/nftables/desired.ts';
import type { NftExec, RulesAdded } from '../../src/modes/nftables/exec.ts';
import { NO_TABLE, parseNftJson, type LiveTable } from '../../src/modes/nftables/live.ts';
import { elementChanges, elementShape } from '../../src/modes/nftables/netlink-writer.ts';
import type { SetElementChange } from '../../src/kernel/nftables/codec.ts';

const RENDER = { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false };
const keep: RealEndpoint = { backend: 'b1', ip: '10.244.1.2', port: 8080 };
const toggle: RealEndpoint = { backend: 'b2', ip: '10.244.2.2', port: 8080 };
const clocks: ClockService[] = [{ port: clockServicePort(0, [keep, toggle]), keep, toggle }];
const COUNTS = { removalConfirm: 10, failConfirm: 3 };
/** The state the fixtures were captured from. */
const base = benchSnapshot(3, 2, clocks.map((c) => c.port));
const [removed, added, serviceAdded, serviceRemoved] = iterationChanges(base, clocks, 0, [keep, toggle], COUNTS) as [
  ReturnType<typeof iterationChanges>[0],
  ReturnType<typeof iterationChanges>[0],
  ReturnType<typeof iterationChanges>[0],
  ReturnType<typeof iterationChanges>[0],
];
const fixture = (name: string): LiveTable => parseNftJson(readFileSync(new URL(`../fixtures/nftables/${name}`, import.meta.url), 'utf8'));

/** An nft that records scripts and answers list() with `table`. */
class RecordingNft implements NftExec {
  readonly scripts: string[] = [];
  constructor(public table: LiveTable = NO_TABLE) {}
  async run(script: string): Promise<void> {
    this.scripts.push(script);
  }
  async list(): Promise<LiveTable> {
    return this.table;
  }
  async listSet(name: string) {
    return this.table.sets.get(name);
  }
  async addRules(): Promise<RulesAdded> {
    throw new Error('the bench writes no rule over netlink');
  }
}

function harness(table?: LiveTable) {
  const nft = new RecordingNft(table);
  const batches: (readonly SetElementChange[])[] = [];
  const h = nftablesHarness({ nft, netlink: { commit: async (c) => (batches.push(c), { messages: c.length, elements: 0, bytes: 0 }) }, close: () => undefined }, { render: RENDER, nodePortIPs: [] });
  return { nft, batches, h };
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const CLOCK = '10.110.0.10 . tcp . 80';

test('raw: one endpoint removed is four element operations in one netlink batch, the slot key ending in a host-order u32', async (t) => {
  const { h, batches } = harness();
  const prepared = h.raw.prepare(removed);
  await prepared.apply();
  t.is(batches.length, 1, 'one batch: one kernel transaction');
  t.deepEqual(
    batches[0]!.map((c) => `${c.op} ${c.set} ${c.elements.map((e) => hex(e.key) + (e.data ? `:${hex(e.data)}` : '')).join(',')}`),
    [
      'delete endpoint-count-2 0a6e000a0600000000500000',
      'delete endpoints 0a6e000a060000000050000001000000',
      'delete hairpin 0af402020af40202060000001f900000',
      'add endpoint-count-1 0a6e000a0600000000500000',
    ],
  );
  t.true(batches[0]!.every((c) => c.family === 'ip' && c.table === 'drover'));
  t.true(prepared.bytes > 0);
  await h.raw.prepare(added).apply();
  t.deepEqual(
    batches[1]!.map((c) => `${c.op} ${c.set} ${c.elements.map((e) => hex(e.key) + (e.data ? `:${hex(e.data)}` : '')).join(',')}`),
    [
      'delete endpoint-count-1 0a6e000a0600000000500000',
      'add endpoint-count-2 0a6e000a0600000000500000',
      'add endpoints 0a6e000a060000000050000001000000:0af402021f900000',
      'add hairpin 0af402020af40202060000001f900000',
    ],
  );
});

test('minimal script: the same operations as element lines of one nft -f script', async (t) => {
  const { h, nft } = harness();
  const script = h.perChange.find((b) => b.method === 'minimal-script')!;
  await script.prepare(removed).apply();
  t.deepEqual(nft.scripts, [
    [
      `delete element ip drover endpoint-count-2 { ${CLOCK} }`,
      `delete element ip drover endpoints { ${CLOCK} . 1 }`,
      'delete element ip drover hairpin { 10.244.2.2 . 10.244.2.2 . tcp . 8080 }',
      `add element ip drover endpoint-count-1 { ${CLOCK} }`,
      '',
    ].join('\n'),
  ]);
});

test('a service removed keeps the hairpin entries another service port still uses', (t) => {
  const f = (sp: typeof serviceAdded.after) => desiredFrontends(sp!, undefined, { nodePortIPs: [] });
  const shared = new Set(f(clocks[0]!.port).flatMap((x) => x.hairpin));
  const ops = minimalNftOps(f(serviceRemoved.before), [], shared);
  t.false(ops.some((o) => o.set === 'hairpin'), 'added-0 has the clock service endpoints: their entries stay');
  t.deepEqual(
    ops.map((o) => `${o.op} ${o.set} ${o.key}`),
    [
      'delete cluster-ips 10.111.0.10 . tcp . 80',
      'delete endpoint-count-2 10.111.0.10 . tcp . 80',
      'delete endpoints 10.111.0.10 . tcp . 80 . 0',
      'delete endpoints 10.111.0.10 . tcp . 80 . 1',
      'delete service-ips 10.111.0.10 . tcp . 80',
    ],
  );
  t.is(minimalNftOps(f(serviceRemoved.before), []).filter((o) => o.set === 'hairpin').length, 2, 'without other users they go');
});

test("kube-proxy-style: kube-proxy's chains rewritten, the stale endpoint chain flushed now and deleted by the next transaction", async (t) => {
  t.is(hash8('bench/clock-0:http/tcp'), 'ROKAIZQF', "the first 8 characters of base32(sha256), as shared/limits/gen.mjs's hash16 begins");
  const { h, nft } = harness();
  const kp = h.perChange.find((b) => b.method === 'kube-proxy')!;
  const svc = 'service-ROKAIZQF-bench/clock-0/tcp/http';
  const ep1 = 'endpoint-G3ZFABHC-bench/clock-0/tcp/http__10.244.1.2/8080';
  const ep2 = 'endpoint-B4JEKYN4-bench/clock-0/tcp/http__10.244.2.2/8080';
  const K = 'ip kube-proxy';
  await kp.prepare(removed).apply();
  t.is(
    nft.scripts[0],
    [
      `add chain ${K} ${svc}`,
      `flush chain ${K} ${svc}`,
      `add chain ${K} ${ep1}`,
      `flush chain ${K} ${ep1}`,
      `add rule ${K} ${ep1} ip saddr 10.244.1.2 jump mark-for-masquerade`,
      `add rule ${K} ${ep1} meta l4proto tcp dnat to 10.244.1.2:8080 comment "bench/clock-0:http"`,
      `add rule ${K} ${svc} ip daddr 10.126.0.10 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade comment "bench/clock-0:http cluster IP"`,
      `add rule ${K} ${svc} numgen random mod 1 vmap { 0 : goto ${ep1} } comment "bench/clock-0:http"`,
      `flush chain ${K} ${ep2}`,
      '',
    ].join('\n'),
  );
  await kp.prepare(added).apply();
  t.false(nft.scripts[1]!.includes('delete chain'), 'the stale chain is used again: not deleted');
  t.true(nft.scripts[1]!.includes(`numgen random mod 2 vmap { 0 : goto ${ep1}, 1 : goto ${ep2} }`));
  t.false(nft.scripts[1]!.includes('element'), 'an endpoint change leaves the service-ips element alone');
  await kp.prepare(serviceAdded).apply();
  t.regex(nft.scripts[2]!, /^add element ip kube-proxy service-ips \{ 10\.127\.0\.10 \. tcp \. 80 : goto service-[A-Z2-7]{8}-bench\/added-0\/tcp\/http \}$/m);
  await kp.prepare(serviceRemoved).apply();
  t.regex(nft.scripts[3]!, /^delete element ip kube-proxy service-ips \{ 10\.127\.0\.10 \. tcp \. 80 \}$/m);
  t.is(nft.scripts[3]!.match(/^flush chain /gm)?.length, 3, 'its three chains flushed');
  await kp.prepare(removed).apply();
  t.is(nft.scripts[4]!.match(/^delete chain ip kube-proxy .*added-0/gm)?.length, 3, 'and deleted by the next transaction');
});

test("kube-proxy's table: the same service ports, moved to 10.112.0.0/12, with hooked base chains and one element each", (t) => {
  const script = kubeProxyTableScript([...base.services.values()].map(kpService), BENCH_CLUSTER_CIDR);
  const lines = script.trimEnd().split('\n');
  t.deepEqual(lines.slice(0, 3), ['add table ip kube-proxy', 'delete table ip kube-proxy', 'add table ip kube-proxy']);
  t.is(lines.filter((l) => / hook (prerouting|output|postrouting) /.test(l)).length, 3);
  t.is(lines.filter((l) => l.startsWith('add chain ip kube-proxy service-')).length, base.services.size);
  const element = lines.filter((l) => l.startsWith('add element'));
  t.is(element.length, 1);
  t.is(element[0]!.match(/ : goto service-/g)?.length, base.services.size);
  t.false(/10\.(96|110|111)\.0\./.test(script), "no address of drover's range");
  // Each pick (an anonymous set the kernel binds by walking the transaction so far) right after its chains, before any other rule.
  const picks = lines.flatMap((l, i) => (l.includes(' vmap { ') ? [i] : []));
  t.is(picks.length, base.services.size);
  t.true(picks.at(-1)! < lines.findIndex((l) => / rule ip kube-proxy (endpoint|service)-\S+ (ip|meta) /.test(l)), 'every pick before the other rules');
  t.is(lines.filter((l) => /^insert rule ip kube-proxy service-\S+ ip daddr .* jump mark-for-masquerade /.test(l)).length, base.services.size, 'the masquerade rule put before the pick');
});

test('full re-render: the table deleted and written again whole in one script', async (t) => {
  const { h, nft } = harness();
  await h.whole!.prepare(serviceAdded).apply();
  const script = nft.scripts[0]!;
  t.true(script.startsWith('delete table ip drover\ntable ip drover {\n'));
  t.is(script, wholeTableScript(serviceAdded.to, RENDER, { nodePortIPs: [] }));
  t.true(script.includes('10.111.0.10 . tcp . 80'), 'with the added service port');
});

test("the read-back checks on the kernel's own listings: the whole state, and each change only once applied", (t) => {
  const { h } = harness();
  const before = fixture('bench-base.json');
  const after = fixture('bench-endpoint-removed.json');
  t.true(h.showsAll(before, base));
  t.false(h.showsAll(after, base));
  t.false(h.shows(before, removed), 'endpoint removed: not before');
  t.true(h.shows(after, removed), 'endpoint removed: after');
  t.true(h.showsAll(after, removed.to), 'the whole state after the change');
  t.true(h.shows(before, added), 'endpoint added back: the base state shows it');
  t.false(h.shows(after, added));
  t.false(h.shows(before, serviceAdded), 'a service port the table lacks');
  t.true(h.shows(before, serviceRemoved), 'and its removal');
  t.false(h.showsAll(NO_TABLE, base));
});

test('every element drover writes has a netlink encoding; the interval set is left to nft', (t) => {
  t.throws(() => elementChanges([{ op: 'add', set: 'firewall-allow', key: '10.0.0.1 . tcp . 80 . 10.1.0.0/16' }]), { message: /netlink set/ });
  t.throws(() => elementChanges([{ op: 'add', set: 'nosuch', key: '10.0.0.1' }]), { message: /netlink set/ });
  t.deepEqual(elementShape('endpoint-count-7'), { key: ['ipv4', 'proto', 'port'] });
  t.deepEqual(elementShape('affinity-10800'), { key: ['ipv4', 'proto', 'port'] });
  const [c] = elementChanges([{ op: 'add', set: 'local-endpoints', key: '10.0.0.1 . udp . 53 . 2', value: '10.1.0.1 . 5353' }]);
  t.is(hex(c!.elements[0]!.key), '0a000001' + '11000000' + '00350000' + '02000000', 'udp is 17; the slot a host-order u32');
  t.is(hex(c!.elements[0]!.data!), '0a010001' + '14e90000');
});

test('the kube-proxy change of a service port without endpoints writes its chain but no element', (t) => {
  const sp = { ...clocks[0]!.port, endpoints: [] };
  const c = kubeProxyChange(undefined, kpService(sp), [], BENCH_CLUSTER_CIDR);
  t.false(c.script.includes('element'));
  t.false(c.script.includes('numgen'));
});

test('a full resync that only deletes the set of an endpoint count no longer in use wrote nothing; one that writes an element did', (t) => {
  const { h } = harness();
  const result = (written: Record<string, number>, deleted: Record<string, number>) => ({
    full: true,
    services: 1,
    endpoints: 1,
    written,
    deleted,
    bytes: 100,
    transactions: 1,
    readMs: 1,
    applyMs: 1,
    totalMs: 2,
  });
  t.true(h.wroteNothing(result({ 'set entry': 0, set: 0, chain: 1 }, { 'set entry': 0, set: 1, chain: 0 })), 'endpoint-count-1 pruned, pick rewritten');
  t.false(h.wroteNothing(result({ 'set entry': 1, set: 0, chain: 0 }, { 'set entry': 0, set: 0, chain: 0 })));
  t.false(h.wroteNothing(result({ 'set entry': 0, set: 0, chain: 0 }, { 'set entry': 2, set: 0, chain: 0 })));
  t.false(h.wroteNothing(result({ 'set entry': 0, set: 1, chain: 1 }, { 'set entry': 0, set: 0, chain: 0 })), 'a missing set');
});
