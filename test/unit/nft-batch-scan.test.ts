import test from 'ava';
import { readFileSync } from 'node:fs';
import { BatchAssembler, tableKey, type NftBatchEvent } from '../../src/kernel/nftables/batch-scan.ts';
import type { NfnlTransport } from '../../src/kernel/nftables/transport.ts';
import { watchOn, type NftWatchEvent } from '../../src/kernel/nftables/watch.ts';

/** notify-tables.hex (capture-notify-tables.ts): the datagrams of each step nft committed, by step. */
const STEPS = new Map<string, Buffer[]>();
{
  let step = '';
  for (const line of readFileSync(new URL('../fixtures/nftables/notify-tables.hex', import.meta.url), 'utf8').trim().split('\n')) {
    if (line.startsWith('# ')) STEPS.set((step = line.slice(2)), []);
    else STEPS.get(step)!.push(Buffer.from(line.split(' ')[1]!, 'hex'));
  }
}
const WATCHED = [
  { family: 2, name: 'drover' },
  { family: 10, name: 'drover' },
];

/** What the assembler reports for `steps`, fed in order: per event, the generation and the changes of `ip drover` as text. */
function scan(a: BatchAssembler, ...steps: string[]): Array<string | { gen: number; name?: string; changes: string[] }> {
  return steps.flatMap((s) => STEPS.get(s)!.flatMap((d) => a.feed(d))).map(show);
}
function show(e: NftBatchEvent | NftWatchEvent): string | { gen: number; name?: string; changes: string[] } {
  if (e.type !== 'batch') return `${e.type}: ${'reason' in e ? e.reason : e.detail}`;
  return { gen: e.batch.gen, ...(e.batch.name ? { name: e.batch.name } : {}), changes: [...e.batch.tables].flatMap(([t, cs]) => cs.map((c) => `${t}: ${c.op} ${c.kind}${c.name ? ` ${c.name}` : ''}`)) };
}

test('each commit to table ip drover is reported at its NEWGEN with what it touched; a commit to another table alone is not', (t) => {
  const a = new BatchAssembler(WATCHED);
  t.deepEqual(scan(a, 'setup', 'other-element', 'drover-elements', 'drover-element-deleted', 'drover-set-deleted', 'drover-chain-deleted', 'drover-table-deleted'), [
    {
      gen: 2,
      name: 'nft',
      changes: [
        'ip drover: add table',
        'ip drover: add chain nat-prerouting',
        'ip drover: add chain filter-output',
        'ip drover: add chain services',
        'ip drover: add set frontends',
        'ip drover: add set affinity',
        'ip drover: add rule nat-prerouting',
        'ip drover: add rule services',
      ],
    },
    // other-element: nothing.
    { gen: 4, name: 'nft', changes: ['ip drover: add element frontends'] },
    { gen: 5, name: 'nft', changes: ['ip drover: delete element frontends'] },
    { gen: 7, name: 'nft', changes: ['ip drover: delete rule services', 'ip drover: delete set frontends'] },
    { gen: 8, name: 'nft', changes: ['ip drover: delete rule nat-prerouting', 'ip drover: delete chain services'] },
    // The kernel announces a table's deletion with its sets and chains (its rules and elements go with them unannounced).
    { gen: 9, name: 'nft', changes: ['ip drover: delete set affinity', 'ip drover: delete chain nat-prerouting', 'ip drover: delete chain filter-output', 'ip drover: delete table'] },
  ]);
  t.deepEqual(a.stats, { messages: 31, batches: 7, watchedBatches: 6, malformed: 0 });
});

test('a batch touching both tables reports only the watched one; the pid is the committing nft process', (t) => {
  const a = new BatchAssembler(WATCHED);
  const events = STEPS.get('both-tables')!.flatMap((d) => a.feed(d));
  t.is(events.length, 1);
  const e = events[0]!;
  if (e.type !== 'batch') return t.fail(e.type);
  t.deepEqual([...e.batch.tables.keys()], ['ip drover']);
  t.deepEqual(e.batch.tables.get('ip drover'), [{ kind: 'element', op: 'add', name: 'frontends' }]);
  t.true(e.batch.pid! > 1);
});

test('watching only table ip other: drover\'s commits are nothing, the shared one is the other table\'s element', (t) => {
  const a = new BatchAssembler([{ family: 2, name: 'other' }]);
  t.deepEqual(scan(a, 'other-element', 'drover-elements', 'both-tables'), [
    { gen: 3, name: 'nft', changes: ['ip other: add element keep'] },
    { gen: 6, name: 'nft', changes: ['ip other: add element keep'] },
  ]);
  // The same name in another family is another table.
  t.deepEqual(scan(new BatchAssembler([{ family: 10, name: 'other' }, { family: 2, name: 'dro' }]), 'other-element', 'drover-elements'), []);
});

test('the datagrams of several steps run together read as they did apart', (t) => {
  const apart = scan(new BatchAssembler(WATCHED), 'drover-elements', 'other-element', 'drover-table-deleted');
  const together = new BatchAssembler(WATCHED).feed(Buffer.concat(['drover-elements', 'other-element', 'drover-table-deleted'].flatMap((s) => STEPS.get(s)!))).map(show);
  t.deepEqual(together, apart);
});

test('a datagram cut in its last message: the whole messages before it are read and counted, the cut one is reported, and the batch in progress is kept', (t) => {
  const [objects, newgen] = STEPS.get('drover-element-deleted')!;
  const whole = new BatchAssembler(WATCHED);
  whole.feed(objects!);
  const a = new BatchAssembler(WATCHED);
  const cut = Buffer.concat([objects!, newgen!.subarray(0, newgen!.length - 4)]);
  t.deepEqual(a.feed(cut).map(show), [`unknown: malformed netlink notification at offset ${objects!.length}: nlmsg_len ${newgen!.readUInt32LE(0)}, ${newgen!.length - 4} bytes left`]);
  t.deepEqual(a.stats, { ...whole.stats, malformed: 1 });
  // Its NEWGEN, whole, then ends the batch the cut datagram began.
  const ended = a.feed(newgen!).map(show);
  t.is(ended.length, 1);
  t.deepEqual(ended, whole.feed(newgen!).map(show));
});

test('a malformed datagram is reported as unknown, never thrown, and reading goes on', (t) => {
  const a = new BatchAssembler(WATCHED);
  const [objects, newgen] = STEPS.get('drover-element-deleted')!;
  // nlmsg_len past the end.
  t.deepEqual(a.feed(objects!.subarray(0, objects!.length - 4)).map(show), [`unknown: malformed netlink notification at offset 0: nlmsg_len ${objects!.readUInt32LE(0)}, ${objects!.length - 4} bytes left`]);
  // An attribute running past its message.
  const bent = Buffer.from(objects!);
  bent.writeUInt16LE(0x400, 20);
  t.deepEqual(a.feed(bent).map(show), ['unknown: element message: attribute of 1024 bytes at offset 20']);
  // No table name: the table attribute's type changed to 9.
  const nameless = Buffer.from(objects!);
  nameless.writeUInt16LE(9, 22);
  t.deepEqual(a.feed(nameless).map(show), ['unknown: element message without its table name']);
  // A NEWGEN cut to its nfgenmsg.
  const bare = Buffer.from(newgen!.subarray(0, 20));
  bare.writeUInt32LE(20, 0);
  t.deepEqual(a.feed(bare).map(show), ['unknown: NEWGEN without a 4-byte NFTA_GEN_ID']);
  // Short garbage: fewer bytes than a header, nothing read.
  t.deepEqual(a.feed(Buffer.from([1, 2, 3])), []);
  t.is(a.stats.malformed, 4);
  // Then a whole step again reads as it should.
  t.deepEqual(scan(a, 'drover-elements'), [{ gen: 4, name: 'nft', changes: ['ip drover: add element frontends'] }]);
});

test('reset drops the batch in progress: its NEWGEN then reports nothing of it', (t) => {
  const a = new BatchAssembler(WATCHED);
  const [objects, newgen] = STEPS.get('drover-elements')!;
  a.feed(objects!);
  a.reset();
  t.deepEqual(a.feed(newgen!), []);
});

test('tableKey names a table as nft does', (t) => {
  t.deepEqual([tableKey(2, 'drover'), tableKey(10, 'drover'), tableKey(1, 'x'), tableKey(99, 'y')], ['ip drover', 'ip6 drover', 'inet x', 'family 99 y']);
});

/** A transport the test drives: datagrams and errors as the socket would deliver them. */
function fakeTransport() {
  let datagram: (d: Buffer) => void = () => undefined;
  let error: (e: Error) => void = () => undefined;
  let closed = false;
  const transport: NfnlTransport = {
    send: async () => undefined,
    onDatagram: (h) => void (datagram = h),
    onError: (h) => void (error = h),
    recvBufferBytes: () => 0,
    sendBufferBytes: () => 0,
    close: () => void (closed = true),
  };
  return { transport, deliver: (d: Buffer) => datagram(d), fail: (e: Error) => error(e), closed: () => closed };
}

test('the watcher reports batches, an ENOBUFS as an overrun (dropping the batch in progress), another socket error as unknown', (t) => {
  const sock = fakeTransport();
  const w = watchOn(sock.transport, WATCHED);
  const seen: ReturnType<typeof show>[] = [];
  w.onEvent((e) => seen.push(show(e)));
  const [objects, newgen] = STEPS.get('drover-element-deleted')!;
  sock.deliver(objects!);
  sock.deliver(newgen!);
  sock.deliver(objects!);
  sock.fail(Object.assign(new Error('recvmsg ENOBUFS'), { code: 'ENOBUFS' }));
  sock.deliver(newgen!);
  sock.fail(new Error('truncated netlink datagram (12 bytes)'));
  t.deepEqual(seen, [
    { gen: 5, name: 'nft', changes: ['ip drover: delete element frontends'] },
    'overrun: notifications were dropped: the receive buffer overflowed (ENOBUFS)',
    'unknown: the notification socket reported: truncated netlink datagram (12 bytes)',
  ]);
  t.like(w.stats(), { batches: 2, watchedBatches: 1, overruns: 1 });
  w.close();
  t.true(sock.closed());
});
