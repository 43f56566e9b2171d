import test from 'ava';
import type { NftCommittedBatch, NftObjectChange } from '../../src/kernel/nftables/batch-scan.ts';
import { FakeNftWatcher } from '../../src/kernel/nftables/watch.ts';
import { DualStackNftablesBackend } from '../../src/modes/nftables/dual-stack.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import { describe, ownWrites, RepairWatch } from '../../src/modes/nftables/repair-watch.ts';
import { silentLogger } from '../../src/util/log.ts';
import { buildFrom } from './model-helpers.ts';
import { until } from '../support/wait.ts';

const FULL = { full: true, changed: new Set<string>() };

function batch(gen: number, changes: NftObjectChange[] = [{ kind: 'element', op: 'delete', name: 'service-ips' }], table = 'ip drover'): NftCommittedBatch {
  return { gen, pid: 4242, name: 'nft', tables: new Map([[table, changes]]) };
}

/** A started watch over a fake watcher, with the repairs it asked for. */
async function started(debounceMs = 5) {
  const watcher = new FakeNftWatcher();
  const watch = new RepairWatch({ open: async () => watcher, logger: silentLogger(), debounceMs });
  const repairs: string[] = [];
  if (!(await watch.start((r, full) => repairs.push(`${full ? 'full' : 'elements'}: ${r}`)))) throw new Error('the watch did not start');
  return { watcher, watch, repairs };
}
const settle = (ms = 40) => new Promise((r) => setTimeout(r, ms));

test('another program\'s batch on drover\'s table asks for one repair, named; a full sync clears what the drift check says', async (t) => {
  const { watcher, watch, repairs } = await started();
  watcher.emit({ type: 'batch', batch: batch(12, [{ kind: 'set', op: 'delete', name: 'service-ips' }]) });
  t.deepEqual(repairs, [], 'debounced');
  await until('a repair', async () => repairs.length === 1, 10_000, 5);
  t.deepEqual(repairs, ['full: nft (pid 4242) committed generation 12: deleted set service-ips of ip drover']);
  t.is(watch.drift(), 'nft (pid 4242) committed generation 12: deleted set service-ips of ip drover');
  watch.covered();
  t.is(watch.drift(), undefined);
  t.deepEqual(watch.counts, { repairs: 1, foreign: 1, own: 0 });
});

test('a burst of batches within the debounce is one repair; elements alone are repaired alone, named by table and set', async (t) => {
  const { watcher, watch, repairs } = await started(30);
  for (let g = 20; g < 30; g++) watcher.emit({ type: 'batch', batch: batch(g) });
  await until('a repair', async () => repairs.length > 0, 10_000, 5);
  await settle(80);
  t.is(repairs.length, 1);
  t.regex(repairs[0]!, /^elements: .*generation 20: deleted element service-ips of ip drover; 9 more batches$/);
  t.is(watch.counts.foreign, 10);
  t.is(watch.drift(), undefined, 'no full sync asked for');
  t.deepEqual(watch.takeElementRepairs(), new Map([['ip drover', new Set(['service-ips'])]]));
  t.deepEqual(watch.takeElementRepairs(), new Map(), 'taken once');
  // Elements and a set in one burst: a full sync.
  watcher.emit({ type: 'batch', batch: batch(40, [{ kind: 'element', op: 'add', name: 'hairpin' }]) });
  watcher.emit({ type: 'batch', batch: batch(41, [{ kind: 'set', op: 'delete', name: 'endpoint-count-2' }]) });
  await until('a repair', async () => repairs.length === 2, 10_000, 5);
  t.regex(repairs[1]!, /^full: /);
  watch.covered();
  t.deepEqual([watch.drift(), watch.takeElementRepairs()], [undefined, new Map()], 'a full sync covers both');
  // A repair of elements that cannot be done alone asks for a full sync.
  watch.escalate('the elements of hairpin could not be put back alone');
  t.deepEqual([repairs[2], watch.drift()], ['full: the elements of hairpin could not be put back alone', 'the elements of hairpin could not be put back alone']);
});

test('drover\'s own batches, noted by the generation read after each write, ask for nothing, also when the notification comes during the write', async (t) => {
  const { watcher, watch, repairs } = await started();
  let gen = 40;
  // The notification arrives while the write is still in flight (its generation not yet read): held, then judged own.
  await watch.writing(async () => {
    gen++;
    watcher.emit({ type: 'batch', batch: batch(gen) });
    await settle(30);
  }, async () => gen);
  // And after it.
  await watch.writing(async () => void gen++, async () => gen);
  watcher.emit({ type: 'batch', batch: batch(gen) });
  await settle();
  t.deepEqual(repairs, []);
  t.deepEqual(watch.counts, { repairs: 0, foreign: 0, own: 2 });
  // Another program's commit during a write of drover's is repaired once the write ends.
  await watch.writing(async () => {
    watcher.emit({ type: 'batch', batch: batch(gen + 1) });
    gen += 2;
    watcher.emit({ type: 'batch', batch: batch(gen) });
    await settle(30);
    t.deepEqual(repairs, [], 'not judged while a write is in flight');
  }, async () => gen);
  await until('a repair', async () => repairs.length === 1, 10_000, 5);
  t.regex(repairs[0]!, /^elements: .*generation 43:/);
});

test('a write whose generation cannot be read: its batch is taken for another program\'s and repaired (never missed)', async (t) => {
  const { watcher, watch, repairs } = await started();
  await watch.writing(async () => undefined, async () => {
    throw new Error('EPERM');
  });
  watcher.emit({ type: 'batch', batch: batch(50) });
  await until('a repair', async () => repairs.length === 1, 10_000, 5);
  t.pass();
});

test('lost notifications or an unreadable datagram ask for a full read-back', async (t) => {
  const { watcher, repairs } = await started();
  watcher.emit({ type: 'overrun', detail: 'notifications were dropped: the receive buffer overflowed (ENOBUFS)' });
  await until('a repair', async () => repairs.length === 1, 10_000, 5);
  t.is(repairs[0], 'full: nf_tables notifications were lost (notifications were dropped: the receive buffer overflowed (ENOBUFS))');
  watcher.emit({ type: 'unknown', reason: 'element message without its table name' });
  await until('a repair', async () => repairs.length === 2, 10_000, 5);
  t.is(repairs[1], 'full: an nf_tables notification could not be read (element message without its table name)');
});

test('a watcher that cannot be opened: start says so; close closes an open one and silences it', async (t) => {
  const failing = new RepairWatch({
    open: async () => {
      throw new Error('EPERM');
    },
    logger: silentLogger(),
  });
  t.false(await failing.start(() => t.fail('no repair')));
  const { watcher, watch, repairs } = await started();
  watch.close();
  t.true(watcher.closed);
  watcher.emit({ type: 'batch', batch: batch(1) });
  await settle();
  t.deepEqual(repairs, []);
});

test('describe names the first batch\'s changes, at most four, and the committer', (t) => {
  const changes: NftObjectChange[] = [
    { kind: 'table', op: 'delete' },
    { kind: 'chain', op: 'delete', name: 'services' },
    { kind: 'set', op: 'delete', name: 'service-ips' },
    { kind: 'set', op: 'delete', name: 'endpoints' },
    { kind: 'set', op: 'delete', name: 'affinity' },
  ];
  t.is(describe([{ gen: 9, tables: new Map([['ip6 drover', changes]]) }]), 'another program committed generation 9: deleted table of ip6 drover, deleted chain services of ip6 drover, deleted set service-ips of ip6 drover, deleted set endpoints of ip6 drover and 1 more');
  t.is(describe([{ gen: 9, pid: 7, tables: new Map([['ip drover', [{ kind: 'rule', op: 'add', name: 'pick' }]]]) }, batch(10)]), 'pid 7 committed generation 9: added rule pick of ip drover; 1 more batch');
  // As the kernel announces a table's deletion: its rules first; named after the table and its chains.
  const table: NftObjectChange[] = [{ kind: 'rule', op: 'delete', name: 'services' }, { kind: 'set', op: 'delete', name: 'hairpin' }, { kind: 'chain', op: 'delete', name: 'services' }, { kind: 'table', op: 'delete' }];
  t.is(describe([{ gen: 3, name: 'nft', tables: new Map([['ip drover', table]]) }]), 'nft committed generation 3: deleted table of ip drover, deleted chain services of ip drover, deleted set hairpin of ip drover, deleted rule services of ip drover');
});

test('ownWrites: scripts, rules and element commits note their generation; reads pass through', async (t) => {
  const nft = new FakeNft();
  const watcher = new FakeNftWatcher();
  const watch = new RepairWatch({ open: async () => watcher, logger: silentLogger(), debounceMs: 5 });
  const repairs: string[] = [];
  await watch.start((r) => repairs.push(r));
  const { nft: wrapped, elements } = ownWrites(nft, { ...nft.writer(), generation: async () => nft.generationId }, watch);
  await wrapped.run('table ip drover {\n}\nadd set ip drover service-ips { type ipv4_addr . inet_proto . inet_service; }\n');
  await elements.commit([{ op: 'add', set: 'service-ips', key: '10.96.0.10 . tcp . 80' }]);
  t.true((await wrapped.list()).sets.get('service-ips')!.elements.has('10.96.0.10 . tcp . 80'));
  for (const g of [1, 2]) watcher.emit({ type: 'batch', batch: batch(g) });
  await settle();
  t.deepEqual([repairs, watch.counts.own], [[], 2]);
  t.is(await elements.generation!(), 2);
});

test('dual-stack backend with a watch: the drift check reads no generation; elements another program changed are put back by the next sync, alone; what cannot be is a full sync', async (t) => {
  const nft = { IPv4: new FakeNft(), IPv6: new FakeNft('IPv6') };
  let reads = 0;
  const generation = async () => (reads++, nft.IPv4.generationId + nft.IPv6.generationId);
  const watcher = new FakeNftWatcher();
  const watch = new RepairWatch({ open: async () => watcher, logger: silentLogger(), debounceMs: 5 });
  const backend = new DualStackNftablesBackend({
    IPv4: { nft: nft.IPv4, elements: { ...nft.IPv4.writer(), generation }, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, frontends: { nodePortIPs: ['192.168.1.1'] } },
    IPv6: { nft: nft.IPv6, elements: { ...nft.IPv6.writer(), generation }, render: { clusterCIDR: 'fd00:244::/48', masqueradeAll: false, family: 'IPv6' }, frontends: { nodePortIPs: ['fd00:1::1'], family: 'IPv6' } },
    logger: silentLogger(),
    watch,
  });
  const repairs: string[] = [];
  await backend.watchDrift((r, full) => repairs.push(`${full ? 'full' : 'elements'}: ${r}`));
  const snapshot = (await buildFrom(['test/fixtures/dualstack/services.yaml'])).snapshot;
  await backend.sync(snapshot, FULL);
  // Each of drover's transactions (both tables) was noted as its own: their notifications ask for nothing.
  const own = nft.IPv4.generationId + nft.IPv6.generationId;
  t.true(own >= 2);
  for (let g = 1; g <= own; g++) watcher.emit({ type: 'batch', batch: batch(g) });
  await settle();
  t.deepEqual(repairs, []);
  // Another program's transaction, on any table: the drift check reads nothing to answer.
  await nft.IPv6.run('add element ip6 drover no-endpoints { fd00:96::99 . tcp . 80 }\n');
  reads = 0;
  t.is(await backend.driftCheck(), undefined, 'nothing seen yet');
  t.is(reads, 0, 'no generation read');
  watcher.emit({ type: 'batch', batch: batch(own + 1, [{ kind: 'element', op: 'add', name: 'no-endpoints' }], 'ip6 drover') });
  await until('a repair', async () => repairs.length === 1, 10_000, 5);
  t.regex(repairs[0]!, /^elements: .*added element no-endpoints of ip6 drover/);
  t.is(await backend.driftCheck(), undefined, 'no full sync');
  // Another program also deleted an element of service-ips of ip drover.
  const [first] = (await nft.IPv4.list()).sets.get('service-ips')!.elements.keys();
  await nft.IPv4.run(`delete element ip drover service-ips { ${first} }\n`);
  watcher.emit({ type: 'batch', batch: batch(own + 2, [{ kind: 'element', op: 'delete', name: 'service-ips' }]) });
  await until('a repair', async () => repairs.length === 2, 10_000, 5);
  const scripts = [nft.IPv4.scripts.length, nft.IPv6.scripts.length];
  await backend.sync(snapshot, { full: false, changed: new Set() });
  t.false((await nft.IPv6.list()).sets.get('no-endpoints')!.elements.has('fd00:96::99 . tcp . 80'), 'the added element deleted');
  t.true((await nft.IPv4.list()).sets.get('service-ips')!.elements.has(first!), 'the deleted element put back');
  t.deepEqual([nft.IPv4.scripts.length, nft.IPv6.scripts.length], scripts, 'over the element writer, no script');
  t.is(repairs.length, 2, 'no full sync asked for');
  // A set the model does not know: a full sync.
  watcher.emit({ type: 'batch', batch: batch(own + 10, [{ kind: 'element', op: 'add', name: 'not-drovers' }]) });
  await until('a repair', async () => repairs.length === 3, 10_000, 5);
  await backend.sync(snapshot, { full: false, changed: new Set() });
  t.is(repairs.length, 4);
  t.regex(repairs[3]!, /^full: the elements of not-drovers in table ip drover could not be put back alone/);
  t.regex((await backend.driftCheck()) ?? '', /not-drovers/);
  await backend.sync(snapshot, FULL);
  t.is(await backend.driftCheck(), undefined, 'the full sync covered it');
  await backend.close();
  t.true(watcher.closed);
});
