/**
 * nftables mode for IPv6 and dual-stack, without a kernel: the exact nft
 * script of a first full sync of dual-stack Services (`table ip drover`,
 * then `table ip6 drover`; test/fixtures/nftables/render-dualstack.nft),
 * a second full sync that plans nothing, the IPv6 table's elements over
 * the element writer, and one family's failure leaving the other synced
 * (src/modes/nftables/dual-stack.ts, on the in-memory nft of fake.ts),
 * and `drover trace` of an IPv6 connection through `table ip6 drover`.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { familyView } from '../../src/model/family.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { modelAfterWrite, planFullSync } from '../../src/modes/nftables/backend.ts';
import { DualStackNftablesBackend, mergeNftDetail, renderFamilies } from '../../src/modes/nftables/dual-stack.ts';
import { UnsafeElementError } from '../../src/modes/nftables/elements.ts';
import { desiredFrontends } from '../../src/modes/nftables/desired.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import { TableModel } from '../../src/modes/nftables/model.ts';
import { orderOps } from '../../src/modes/nftables/plan.ts';
import { nftTraceContext, nftTraceFormatOf } from '../../src/modes/nftables/trace.ts';
import { FamilySyncError } from '../../src/modes/shared/dual-stack.ts';
import { trace } from '../../src/inspect/trace.ts';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { silentLogger } from '../../src/util/log.ts';
import { buildFrom } from './model-helpers.ts';

const FIXTURES = ['test/fixtures/dualstack/services.yaml', 'test/fixtures/dualstack/nft-lb.yaml'];
const FULL = { full: true, changed: new Set<string>() };
const V4 = { render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, nodePortIPs: ['192.168.1.1'] };
const V6 = { render: { clusterCIDR: 'fd00:244::/48', masqueradeAll: false, family: 'IPv6' as const }, nodePortIPs: ['fd00:1::1'] };

/** The dual-stack fixtures on node-a, whose InternalIPs are in both families' loadBalancerSourceRanges. */
async function dualStack(): Promise<Snapshot> {
  const r = await buildFrom(FIXTURES);
  return { ...r.snapshot, node: { name: 'node-a', addresses: [{ type: 'InternalIP', address: '192.168.100.1' }, { type: 'InternalIP', address: 'fd00:100::1' }] } };
}

/** Both families' backends on in-memory tables, with element writers; one generation id for both, as a namespace has. */
function backends() {
  const nft = { IPv4: new FakeNft(), IPv6: new FakeNft('IPv6') };
  const generation = async () => nft.IPv4.generationId + nft.IPv6.generationId;
  const backend = new DualStackNftablesBackend({
    IPv4: { nft: nft.IPv4, elements: { ...nft.IPv4.writer(), generation }, render: V4.render, frontends: { nodePortIPs: V4.nodePortIPs } },
    IPv6: { nft: nft.IPv6, elements: { ...nft.IPv6.writer(), generation }, render: V6.render, frontends: { nodePortIPs: V6.nodePortIPs, family: 'IPv6' } },
    logger: silentLogger(),
  });
  return { nft, backend };
}

test('a first full sync of dual-stack Services writes table ip drover and table ip6 drover, exactly', async (t) => {
  const { text, leftOut } = renderFamilies(await dualStack(), { IPv4: V4, IPv6: V6 });
  t.is(text, readFileSync(new URL('../fixtures/nftables/render-dualstack.nft', import.meta.url), 'utf8'));
  t.deepEqual(leftOut, []);
});

test('the IPv6 table holds only IPv6 frontends and endpoints, and a second full sync against it plans nothing', async (t) => {
  const view = familyView(await dualStack(), 'IPv6');
  const empty = new TableModel();
  const first = planFullSync(empty, view, V6.render, { nodePortIPs: V6.nodePortIPs, family: 'IPv6' }, false);
  t.true(first.ops.every((o) => o.key.includes(':') && !/\b10\.|192\.168\./.test(`${o.key} ${o.value ?? ''}`)), 'no IPv4 address in the IPv6 table');
  const written = TableModel.fromLive(modelAfterWrite(empty, first.structure, first.want, orderOps(first.ops)).toLive());
  t.deepEqual(written.types.get('service-ips'), { keyType: 'ipv6_addr . inet_proto . inet_service' });
  const again = planFullSync(written, view, V6.render, { nodePortIPs: V6.nodePortIPs, family: 'IPv6' }, false);
  t.deepEqual([again.ops, again.structure], [[], { rebuild: false, addSets: [], writeChains: [], deleteSets: [], deleteChains: [] }]);
});

test('an address of the other family never reaches a table: ClusterIP and NodePort address are checked against the family', async (t) => {
  const sp = familyView(await dualStack(), 'IPv4').services.get('default/web:http')!;
  t.throws(() => desiredFrontends(sp, undefined, { nodePortIPs: [], family: 'IPv6' }), { instanceOf: UnsafeElementError, message: /IPv6 address "10\.96\.0\.10"/ });
  const sp6 = familyView(await dualStack(), 'IPv6').services.get('default/web:http')!;
  t.throws(() => desiredFrontends(sp6, undefined, { nodePortIPs: ['192.168.1.1'], family: 'IPv6' }), { instanceOf: UnsafeElementError });
});

test('dual-stack backend: both tables synced, elements of a later change go to each family over its element writer', async (t) => {
  const { nft, backend } = backends();
  const snapshot = await dualStack();
  await backend.sync(snapshot, FULL);
  t.true((await nft.IPv4.list()).sets.get('service-ips')!.elements.has('10.96.0.10 . tcp . 80'));
  t.true((await nft.IPv6.list()).sets.get('service-ips')!.elements.has('fd00:96::10 . tcp . 80'));
  // One IPv6 endpoint of web gone: the IPv6 table's slot, count and hairpin elements; nothing of the IPv4 table.
  const web6 = snapshot.ipv6Services!.get('default/web:http')!;
  const ipv6Services = new Map(snapshot.ipv6Services);
  ipv6Services.set('default/web:http', { ...web6, endpoints: web6.endpoints.filter((e) => e.ip !== 'fd00:244:1::3') });
  const scripts = [nft.IPv4.scripts.length, nft.IPv6.scripts.length];
  const r = await backend.sync({ ...snapshot, ipv6Services }, { full: false, changed: new Set(['default/web:http']) });
  t.deepEqual(r.detail, { mode: 'nftables', via: 'netlink', structural: false });
  t.deepEqual([nft.IPv4.scripts.length, nft.IPv6.scripts.length], scripts, 'no nft script');
  const slots = (await nft.IPv6.list()).sets.get('endpoints')!.elements;
  t.deepEqual([...slots].filter(([k]) => k.startsWith('fd00:96::10 . ')), [['fd00:96::10 . tcp . 80 . 0', 'fd00:244:1::2 . 8080']]);
  t.is(await backend.driftCheck(), undefined, "both families' writes are drover's own: no drift");
  await nft.IPv6.run('add element ip6 drover no-endpoints { fd00:96::99 . tcp . 80 }\n');
  t.regex((await backend.driftCheck()) ?? '', /generation moved/, "another program's transaction is drift");
});

test('dual-stack backend: a failing IPv6 table never stops the IPv4 sync, and the failure names the family', async (t) => {
  const { nft, backend } = backends();
  const snapshot = await dualStack();
  nft.IPv6.failNext = 'Error: Could not process rule: Operation not supported';
  const err = await t.throwsAsync(backend.sync(snapshot, FULL), { instanceOf: FamilySyncError });
  t.deepEqual(err!.failures.map((f) => f.family), ['IPv6']);
  t.true((await nft.IPv4.list()).sets.get('service-ips')!.elements.has('10.96.0.10 . tcp . 80'), 'the IPv4 table was written');
  t.false((await nft.IPv6.list()).exists);
  // The retry (a full sync) writes the IPv6 table and leaves the IPv4 one as it is.
  const v4scripts = nft.IPv4.scripts.length;
  await backend.sync(snapshot, FULL);
  t.true((await nft.IPv6.list()).sets.get('service-ips')!.elements.has('fd00:96::10 . tcp . 80'));
  t.is(nft.IPv4.scripts.length, v4scripts, 'nothing written to the IPv4 table again');
});

test('dual-stack backend: cleanup deletes both tables and nothing else', async (t) => {
  const { nft, backend } = backends();
  await backend.sync(await dualStack(), FULL);
  const r = await backend.cleanup();
  t.deepEqual([(await nft.IPv4.list()).exists, (await nft.IPv6.list()).exists], [false, false]);
  t.deepEqual(nft.IPv6.scripts.at(-1), 'delete table ip6 drover\n');
  t.true(r.removed.chain! > 20);
});

test('dual-stack backend: a failing IPv4 cleanup still deletes table ip6 drover, then reports the IPv4 failure', async (t) => {
  const { nft, backend } = backends();
  await backend.sync(await dualStack(), FULL);
  nft.IPv4.failNext = 'Error: Could not process rule: Device or resource busy';
  await t.throwsAsync(backend.cleanup(), { message: /Device or resource busy/ });
  t.false((await nft.IPv6.list()).exists, 'table ip6 drover deleted');
  t.true((await nft.IPv4.list()).exists, 'table ip drover left, as its delete failed');
});

test('without IPv6 service ports nor table ip6 drover the IPv6 family stays dormant: nothing read or written for it', async (t) => {
  const { nft, backend } = backends();
  const snapshot = await dualStack();
  await backend.sync({ services: snapshot.services, ...(snapshot.node ? { node: snapshot.node } : {}) }, FULL);
  t.deepEqual(nft.IPv6.scripts, []);
  t.false((await nft.IPv6.list()).exists);
});

test('trace walks table ip6 drover for an IPv6 connection: the endpoints of the IPv6 ClusterIP, masqueraded from outside the pod range', async (t) => {
  const view = familyView(await dualStack(), 'IPv6');
  const empty = new TableModel();
  const plan = planFullSync(empty, view, V6.render, { nodePortIPs: V6.nodePortIPs, family: 'IPv6' }, false);
  const live = modelAfterWrite(empty, plan.structure, plan.want, orderOps(plan.ops)).toLive();
  const { ctx, note } = nftTraceContext(live, new Set(['fd00:1::1']), { family: 'IPv6' });
  t.is(note, '');
  const r = trace(ctx, { src: 'fd00:100::2', dst: 'fd00:96::10', dport: 80, proto: 'tcp' });
  const text = formatTrace(r, nftTraceFormatOf('IPv6'));
  t.regex(text, /ip6 drover services/);
  t.regex(text, /fd00:244:1::2:8080|\[fd00:244:1::2\]:8080/);
  t.regex(text, /fd00:244:1::3:8080|\[fd00:244:1::3\]:8080/);
  t.regex(text, /verdict: DNAT to one of 2 endpoints, masqueraded\n/);
  // From inside fd00:244::/48 no masquerade mark; to the IPv6 frontend without endpoints: REJECT.
  t.regex(formatTrace(trace(ctx, { src: 'fd00:244::9', dst: 'fd00:96::10', dport: 80, proto: 'tcp' }), nftTraceFormatOf('IPv6')), /verdict: DNAT to one of 2 endpoints, not masqueraded\n/);
  t.regex(formatTrace(trace(ctx, { src: 'fd00:100::2', dst: 'fd00:96::30', dport: 80, proto: 'udp' }), nftTraceFormatOf('IPv6')), /REJECTed \(ip6 drover endpoints-check rule 1\)/);
});

test('the two families\' sync details merge to the way that wrote the most: a table created from nothing, a script, elements, nothing', (t) => {
  const d = (via: 'none' | 'netlink' | 'nft' | 'nft+netlink', structural = false) => ({ mode: 'nftables' as const, via, structural });
  t.deepEqual(mergeNftDetail(d('nft+netlink', true), d('nft+netlink', true)), d('nft+netlink', true));
  t.deepEqual(mergeNftDetail(d('nft+netlink', true), d('netlink')), d('nft+netlink', true));
  t.deepEqual(mergeNftDetail(d('netlink'), d('nft', true)), d('nft', true));
  t.deepEqual(mergeNftDetail(d('none'), d('netlink')), d('netlink'));
  t.deepEqual(mergeNftDetail(d('none'), d('none')), d('none'));
});
