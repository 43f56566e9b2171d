/**
 * The nf_tables netlink codec against the bytes nft 1.0.6 sends and
 * receives (test/fixtures/nftables/*.hex, see the README there for how they
 * were captured), plus round trips and bad input.
 */
import test from 'ava';
import { endianness } from 'node:os';
import { decodeConcat, encodeConcat, concatSize, type ConcatField, type FieldKind } from '../../src/kernel/nftables/concat.ts';
import {
  NftDecodeError,
  NftValidationError,
  decodeAck,
  decodeDone,
  decodeGen,
  decodeSetElemRef,
  decodeSetElems,
  encodeGetGen,
  encodeGetSetElems,
  encodeSetElemBatch,
  nftType,
  parseMessages,
  type NlMessage,
  type SetElementChange,
} from '../../src/kernel/nftables/codec.ts';
import { NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END, NFTA_SET_ELEM_LIST, NFT_MSG, NLMSG_DONE, NLMSG_ERROR, NLM_F } from '../../src/kernel/nftables/constants.ts';
import { DroverError } from '../../src/errors.ts';
import { capture } from '../support/nft-captures.ts';
import type { ElementOp } from '../../src/modes/nftables/model.ts';
import { elementChanges, fieldsText, readShape } from '../../src/modes/nftables/netlink-writer.ts';

const LE = endianness() === 'LE';

/** The messages of the one datagram nft sent that starts with BATCH_BEGIN. */
function nftBatch(name: string): NlMessage[] {
  const batches = capture(name)
    .filter((d) => d.dir === 'send')
    .map((d) => parseMessages(d.bytes))
    .filter((m) => m[0]?.type === NFNL_MSG_BATCH_BEGIN);
  if (batches.length !== 1) throw new Error(`${name}: ${batches.length} batches`);
  return batches[0]!;
}

/** The first message of type `type` that nft sent or received in a capture. */
function firstOf(name: string, dir: 'send' | 'recv', type: number): NlMessage {
  for (const d of capture(name)) {
    if (d.dir !== dir) continue;
    const m = parseMessages(d.bytes).find((x) => x.type === type);
    if (m) return m;
  }
  throw new Error(`${name}: no ${dir} message of type 0x${type.toString(16)}`);
}

/** Every message of `type` that nft received in a capture. */
function received(name: string, type: number): NlMessage[] {
  return capture(name)
    .filter((d) => d.dir === 'recv')
    .flatMap((d) => parseMessages(d.bytes))
    .filter((m) => m.type === type);
}

/** Drop the attributes of type `drop` from an attribute stream, byte for byte otherwise. */
function withoutAttr(attrs: Buffer, drop: number): Buffer {
  const parts: Buffer[] = [];
  for (let off = 0; off + 4 <= attrs.length; ) {
    const len = attrs.readUInt16LE(off);
    const padded = (len + 3) & ~3;
    if ((attrs.readUInt16LE(off + 2) & 0x3fff) !== drop) parts.push(attrs.subarray(off, off + padded));
    off += padded;
  }
  return Buffer.concat(parts);
}

/**
 * A message with its nlmsg_seq and nlmsg_pid zeroed: the only header fields
 * that differ between two senders. `clearFlags` bits are cleared too.
 */
function normalised(m: NlMessage, clearFlags = 0, payload = m.payload): Buffer {
  const b = Buffer.alloc(16 + payload.length);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE(m.type, 4);
  b.writeUInt16LE(m.flags & ~clearFlags, 6);
  payload.copy(b, 16);
  return b;
}

const SVC_A: ConcatField[] = [{ ipv4: '10.96.0.10' }, { proto: 6 }, { port: 80 }];
const SVC_B: ConcatField[] = [{ ipv4: '10.96.0.53' }, { proto: 17 }, { port: 53 }];
const SVC_KINDS: FieldKind[] = ['ipv4', 'proto', 'port'];
const BK_KINDS: FieldKind[] = ['ipv4', 'proto', 'port', 'u32'];
const BK_DATA_KINDS: FieldKind[] = ['ipv4', 'port'];

const ref = (set: string) => ({ family: 'ip' as const, table: 'drover', set });

const ADD: SetElementChange[] = [
  { op: 'add', ...ref('svc'), elements: [{ key: encodeConcat(SVC_A) }, { key: encodeConcat(SVC_B) }] },
  {
    op: 'add',
    ...ref('bk'),
    elements: [
      { key: encodeConcat([...SVC_A, { u32: 0 }]), data: encodeConcat([{ ipv4: '10.244.1.2' }, { port: 8080 }]) },
      { key: encodeConcat([...SVC_B, { u32: 0 }]), data: encodeConcat([{ ipv4: '10.244.1.3' }, { port: 53 }]) },
    ],
  },
];

const DEL: SetElementChange[] = [
  { op: 'delete', ...ref('svc'), elements: [{ key: encodeConcat(SVC_B) }] },
  { op: 'delete', ...ref('bk'), elements: [{ key: encodeConcat([...SVC_B, { u32: 0 }]) }] },
];

/**
 * Compare our batch with nft's, message by message. The differences allowed,
 * and asserted to be exactly these: nlmsg_seq and nlmsg_pid everywhere; on
 * element messages our NLM_F_ACK (nft sends none) and, on nft's NEWSETELEM,
 * its NFTA_SET_ELEM_LIST_SET_ID (which we do not send).
 */
function assertSameBatch(t: import('ava').ExecutionContext, name: string, changes: SetElementChange[]): void {
  const theirs = nftBatch(name);
  const ours = parseMessages(encodeSetElemBatch(changes, { firstSeq: 100 }).bytes);
  t.is(ours.length, theirs.length, 'as many messages');
  for (const [i, o] of ours.entries()) {
    const n = theirs[i]!;
    const element = o.type === nftType(NFT_MSG.NEWSETELEM) || o.type === nftType(NFT_MSG.DELSETELEM);
    if (element) {
      t.is(o.flags & NLM_F.ACK, NLM_F.ACK, `message ${i}: we ask for an ACK`);
      t.is(n.flags & NLM_F.ACK, 0, `message ${i}: nft does not`);
    }
    let theirPayload = n.payload;
    if (o.type === nftType(NFT_MSG.NEWSETELEM)) {
      const attrs = n.payload.subarray(4);
      const stripped = withoutAttr(attrs, NFTA_SET_ELEM_LIST.SET_ID);
      t.is(attrs.length - stripped.length, 8, `message ${i}: nft adds one u32 NFTA_SET_ELEM_LIST_SET_ID`);
      theirPayload = Buffer.concat([n.payload.subarray(0, 4), stripped]);
    }
    t.is(
      normalised(o, element ? NLM_F.ACK : 0).toString('hex'),
      normalised(n, 0, theirPayload).toString('hex'),
      `message ${i} (type 0x${o.type.toString(16)}) matches nft's`,
    );
  }
}

test('the add batch is byte for byte what nft sends for two elements of a set and two of a map', (t) => {
  assertSameBatch(t, 'add', ADD);
});

test('the delete batch is byte for byte what nft sends', (t) => {
  assertSameBatch(t, 'del', DEL);
});

/** The element operations of add6.nft and del6.nft (table ip6 drover, drover's own set shapes), as the backend plans them. */
const ADD6: ElementOp[] = [
  { op: 'add', set: 'service-ips', key: 'fd00:96::10 . tcp . 80' },
  { op: 'add', set: 'service-ips', key: 'fd00:96::20 . udp . 53' },
  { op: 'add', set: 'endpoints', key: 'fd00:96::10 . tcp . 80 . 0', value: 'fd00:244:1::2 . 8080' },
  { op: 'add', set: 'endpoints', key: 'fd00:96::10 . tcp . 80 . 1', value: 'fd00:244:1::3 . 8080' },
  { op: 'add', set: 'hairpin', key: 'fd00:244:1::2 . fd00:244:1::2 . tcp . 8080' },
];
const DEL6: ElementOp[] = [
  { op: 'delete', set: 'endpoints', key: 'fd00:96::10 . tcp . 80 . 1' },
  { op: 'delete', set: 'service-ips', key: 'fd00:96::20 . udp . 53' },
];

test("IPv6: the element writer's add and delete batches for table ip6 drover are byte for byte what nft sends (NFPROTO_IPV6, 16-byte addresses)", (t) => {
  assertSameBatch(t, 'add6', elementChanges(ADD6, 'IPv6'));
  assertSameBatch(t, 'del6', elementChanges(DEL6, 'IPv6'));
  t.is(nftBatch('add6')[1]!.payload[0], 10, "nft's own batch is NFPROTO_IPV6");
});

test('IPv6: the dump nft received of map endpoints reads back as the element texts written', (t) => {
  const shape = readShape('endpoints', 'IPv6')!;
  const elements = received('list-endpoints6', nftType(NFT_MSG.NEWSETELEM)).flatMap(decodeSetElems);
  t.deepEqual(
    elements.map((e) => `${fieldsText(decodeConcat(e.key, shape.key))} : ${fieldsText(decodeConcat(e.data!, shape.value!))}`),
    ['fd00:96::10 . tcp . 80 . 0 : fd00:244:1::2 . 8080'],
  );
});

test('IPv6: an element of the other family is refused before anything is sent', (t) => {
  t.throws(() => elementChanges([{ op: 'add', set: 'service-ips', key: '10.96.0.10 . tcp . 80' }], 'IPv6'), { instanceOf: NftValidationError });
  t.throws(() => elementChanges([{ op: 'add', set: 'service-ips', key: 'fd00:96::10 . tcp . 80' }], 'IPv4'), { instanceOf: NftValidationError });
});

test('a numgen bucket is a host-endian u32 in the key, as nft encodes it', (t) => {
  assertSameBatch(t, 'numgen', [
    {
      op: 'add',
      ...ref('bk'),
      elements: [{ key: encodeConcat([{ ipv4: '10.96.0.99' }, { proto: 6 }, { port: 443 }, { u32: 0x01020304 }]), data: encodeConcat([{ ipv4: '10.244.9.9' }, { port: 8443 }]) }],
    },
  ]);
  const bucket = encodeConcat([{ u32: 0x01020304 }]);
  t.is(bucket.toString('hex'), LE ? '04030201' : '01020304');
});

test('the batch framing: BEGIN and END carry res_id htons(10), AF_UNSPEC, and sequence numbers increase', (t) => {
  const b = encodeSetElemBatch(ADD, { firstSeq: 7 });
  const m = parseMessages(b.bytes);
  t.deepEqual(
    m.map((x) => x.seq),
    [7, 8, 9, 10],
  );
  t.is(b.beginSeq, 7);
  t.is(b.endSeq, 10);
  t.is(b.nextSeq, 11);
  t.is(m[0]!.type, NFNL_MSG_BATCH_BEGIN);
  t.is(m[3]!.type, NFNL_MSG_BATCH_END);
  for (const x of [m[0]!, m[3]!]) {
    t.is(x.payload.toString('hex'), '0000000a');
    t.is(x.flags, NLM_F.REQUEST);
  }
  t.is(m[1]!.flags, NLM_F.REQUEST | NLM_F.ACK | NLM_F.CREATE);
  t.is(m[1]!.payload[0], 2, 'NFPROTO_IPV4');
  const del = parseMessages(encodeSetElemBatch([{ ...DEL[0]!, family: 'ip6' }], { firstSeq: 1 }).bytes);
  t.is(del[1]!.flags, NLM_F.REQUEST | NLM_F.ACK);
  t.is(del[1]!.payload[0], 10, 'NFPROTO_IPV6');
  t.deepEqual(
    b.messages.map((x) => [x.seq, x.op, x.set, x.first, x.count]),
    [
      [8, 'add', 'svc', 0, 2],
      [9, 'add', 'bk', 0, 2],
    ],
  );
});

test('sequence numbers wrap at 2^32 and skip 0', (t) => {
  const m = parseMessages(encodeSetElemBatch(ADD, { firstSeq: 0xfffffffe }).bytes);
  t.deepEqual(
    m.map((x) => x.seq),
    [0xfffffffe, 0xffffffff, 1, 2],
  );
});

test('many elements are split so that no message exceeds the limit, in order, none lost', (t) => {
  const elements = Array.from({ length: 5000 }, (_, i) => ({
    key: encodeConcat([{ ipv4: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` }, { proto: 6 }, { port: i % 65536 }, { u32: 0 }]),
    data: encodeConcat([{ ipv4: '10.244.0.1' }, { port: 80 }]),
  }));
  for (const maxMessageBytes of [65536, 4096, 200]) {
    const b = encodeSetElemBatch([{ op: 'add', ...ref('bk'), elements }], { firstSeq: 1, maxMessageBytes });
    const msgs = parseMessages(b.bytes);
    const body = msgs.slice(1, -1);
    t.true(body.length > 1, `${maxMessageBytes}: split`);
    t.true(
      body.every((m) => m.payload.length + 16 <= maxMessageBytes),
      `${maxMessageBytes}: every message within the limit`,
    );
    t.true(msgs.every((m, i) => i === 0 || m.seq === msgs[i - 1]!.seq + 1));
    const keys = body.flatMap((m) => decodeSetElems({ ...m, type: nftType(NFT_MSG.NEWSETELEM) }).map((e) => e.key.toString('hex')));
    t.deepEqual(
      keys,
      elements.map((e) => e.key.toString('hex')),
    );
    t.is(b.messages.reduce((n, m) => n + m.count, 0), 5000);
  }
  // 65536 bytes: the largest message still fits nla_len of NFTA_SET_ELEM_LIST_ELEMENTS.
  const big = encodeSetElemBatch([{ op: 'add', ...ref('bk'), elements }], { firstSeq: 1 });
  t.true(big.messages.some((m) => m.bytes > 60000));
});

test('an empty change sends no element message, only BEGIN and END', (t) => {
  const b = encodeSetElemBatch([{ op: 'add', ...ref('svc'), elements: [] }], { firstSeq: 1 });
  t.deepEqual(b.messages, []);
  t.is(parseMessages(b.bytes).length, 2);
});

test('the GETSETELEM dump request and the GETGEN request are what nft sends', (t) => {
  const get = firstOf('list-svc', 'send', nftType(NFT_MSG.GETSETELEM));
  t.is(get.flags, NLM_F.REQUEST | NLM_F.DUMP);
  const [ours] = parseMessages(encodeGetSetElems(ref('svc'), 5));
  t.is(normalised(ours!).toString('hex'), normalised(get).toString('hex'));
  const gen = firstOf('list-svc', 'send', nftType(NFT_MSG.GETGEN));
  const [ourGen] = parseMessages(encodeGetGen(9));
  t.is(normalised(ourGen!).toString('hex'), normalised(gen).toString('hex'));
  t.is(ours!.seq, 5);
  t.is(ourGen!.seq, 9);
});

test('the dump replies nft received decode into the elements it added, the kernel nests without NLA_F_NESTED', (t) => {
  const svc = received('list-svc', nftType(NFT_MSG.NEWSETELEM));
  t.deepEqual(decodeSetElemRef(svc[0]!), { table: 'drover', set: 'svc' });
  t.is(svc[0]!.payload.readUInt16LE(4 + 12 + 8 + 2) & 0x8000, 0, 'NFTA_SET_ELEM_LIST_ELEMENTS without NLA_F_NESTED');
  // After del.nft one element of each is left.
  t.deepEqual(
    svc.flatMap(decodeSetElems).map((e) => ({ key: decodeConcat(e.key, SVC_KINDS), data: e.data })),
    [{ key: SVC_A, data: undefined }],
  );
  // The kernel lists a hash set in hash order: sort by key.
  const bk = received('list-numgen', nftType(NFT_MSG.NEWSETELEM))
    .flatMap(decodeSetElems)
    .sort((a, b) => Buffer.compare(a.key, b.key));
  t.deepEqual(
    bk.map((e) => [decodeConcat(e.key, BK_KINDS), decodeConcat(e.data!, BK_DATA_KINDS)]),
    [
      [
        [...SVC_A, { u32: 0 }],
        [{ ipv4: '10.244.1.2' }, { port: 8080 }],
      ],
      [
        [{ ipv4: '10.96.0.99' }, { proto: 6 }, { port: 443 }, { u32: 0x01020304 }],
        [{ ipv4: '10.244.9.9' }, { port: 8443 }],
      ],
    ],
  );
  // The last message of a dump has an empty element list; then NLMSG_DONE with error 0.
  const lastSvc = svc[svc.length - 1]!;
  t.deepEqual(decodeSetElems(lastSvc), []);
  t.is(lastSvc.flags & NLM_F.MULTI, NLM_F.MULTI);
  const [done] = received('list-svc', NLMSG_DONE);
  t.is(decodeDone(done!), 0);
});

test('NEWGEN replies decode to the big-endian NFTA_GEN_ID', (t) => {
  const gen = firstOf('add', 'recv', nftType(NFT_MSG.NEWGEN));
  const id = decodeGen(gen);
  t.is(id, gen.payload.readUInt32BE(4 + 4));
  t.true(id > 0);
  t.throws(() => decodeGen({ ...gen, payload: gen.payload.subarray(0, 4) }), { instanceOf: NftDecodeError });
});

test('ACKs as nft received them: error 0, NLM_F_CAPPED, the request header copied back', (t) => {
  const [ack] = received('list-svc', NLMSG_ERROR);
  t.is(ack!.flags & NLM_F.CAPPED, NLM_F.CAPPED);
  const a = decodeAck(ack!);
  t.is(a.error, 0);
  t.is(a.type, nftType(NFT_MSG.GETTABLE));
  // An error (-ENOENT) with the request appended.
  const err = Buffer.alloc(20);
  err.writeInt32LE(-2, 0);
  err.writeUInt32LE(20, 4);
  err.writeUInt16LE(nftType(NFT_MSG.DELSETELEM), 8);
  err.writeUInt32LE(77, 12);
  t.deepEqual(decodeAck({ type: NLMSG_ERROR, flags: 0, seq: 77, pid: 0, payload: err }), { error: 2, seq: 77, type: nftType(NFT_MSG.DELSETELEM) });
});

test('parseMessages splits datagrams holding several messages and refuses a bad length', (t) => {
  const both = capture('list-svc').find((d) => d.dir === 'recv' && parseMessages(d.bytes).some((m) => m.type === NLMSG_DONE))!;
  t.deepEqual(
    parseMessages(both.bytes).map((m) => m.type),
    [nftType(NFT_MSG.NEWSETELEM), NLMSG_DONE],
  );
  const bad = Buffer.from(both.bytes);
  bad.writeUInt32LE(4000, 0);
  t.throws(() => parseMessages(bad), { instanceOf: NftDecodeError });
});

// --------------------------------------------------------------------------- concat

test('encodeConcat pads each field to 4 bytes, network order but for u32', (t) => {
  t.is(encodeConcat(SVC_A).toString('hex'), '0a60000a' + '06000000' + '00500000');
  t.is(encodeConcat([{ ipv6: 'fd00::1' }, { port: 443 }]).toString('hex'), 'fd000000000000000000000000000001' + '01bb0000');
  t.is(concatSize(BK_KINDS), 16);
  t.is(concatSize(['ipv6', 'proto', 'port', 'u32']), 28);
});

test('decodeConcat inverts encodeConcat', (t) => {
  const cases: [ConcatField[], FieldKind[]][] = [
    [SVC_A, SVC_KINDS],
    [[{ ipv4: '0.0.0.0' }, { proto: 255 }, { port: 65535 }, { u32: 0xffffffff }], BK_KINDS],
    [[{ ipv6: '2001:db8::8:800:200c:417a' }, { proto: 132 }, { port: 0 }, { u32: 7 }], ['ipv6', 'proto', 'port', 'u32']],
    [[{ ipv6: '::ffff:10.0.0.1' }], ['ipv6']],
    [[{ port: 8080 }], ['port']],
  ];
  for (const [fields, kinds] of cases) {
    const enc = encodeConcat(fields);
    t.is(enc.length, concatSize(kinds));
    const dec = decodeConcat(enc, kinds);
    t.deepEqual(encodeConcat(dec), enc);
  }
  t.deepEqual(decodeConcat(encodeConcat([{ ipv6: 'FD00:0::1' }]), ['ipv6']), [{ ipv6: 'fd00::1' }], 'canonical text');
  t.throws(() => decodeConcat(Buffer.alloc(8), SVC_KINDS), { instanceOf: NftDecodeError });
});

test('bad fields are refused, each named', (t) => {
  const bad: [ConcatField[], string][] = [
    [[{ ipv4: '10.0.0.256' }], 'key[0].ipv4'],
    [[{ ipv4: '10.0.0.01' }], 'key[0].ipv4'],
    [[{ ipv4: 'fd00::1' }], 'key[0].ipv4'],
    [[{ ipv4: 'drover' }, { proto: 6 }], 'key[0].ipv4'],
    [[{ ipv4: '10.0.0.1' }, { ipv6: '10.0.0.1' }], 'key[1].ipv6'],
    [[{ ipv6: 'fe80::1%eth0' }], 'key[0].ipv6'],
    [[{ ipv4: '10.0.0.1' }, { proto: 256 }], 'key[1].proto'],
    [[{ ipv4: '10.0.0.1' }, { proto: -1 }], 'key[1].proto'],
    [[{ ipv4: '10.0.0.1' }, { proto: 6 }, { port: 65536 }], 'key[2].port'],
    [[{ ipv4: '10.0.0.1' }, { proto: 6 }, { port: 1.5 }], 'key[2].port'],
    [[{ ipv4: '10.0.0.1' }, { proto: 6 }, { port: '80' as unknown as number }], 'key[2].port'],
    [[{ u32: 2 ** 32 }], 'key[0].u32'],
    [[{ u32: Number.NaN }], 'key[0].u32'],
    [[{ mark: 1 } as unknown as ConcatField], 'key[0]'],
    [[{ ipv4: '10.0.0.1', port: 80 } as unknown as ConcatField], 'key[0]'],
    [[], 'key'],
    [Array.from({ length: 5 }, () => ({ ipv6: '::1' })), 'key'],
  ];
  for (const [fields, field] of bad) {
    const err = t.throws(() => encodeConcat(fields), { instanceOf: NftValidationError }, JSON.stringify(fields));
    t.is(err?.field, field);
    t.true(err instanceof DroverError);
    t.true(err!.message.includes(field));
  }
});

test('bad names, families, ops and values are refused before any byte is written, each named', (t) => {
  const key = encodeConcat(SVC_A);
  const ok: SetElementChange = { op: 'add', ...ref('svc'), elements: [{ key }] };
  const bad: [SetElementChange, string][] = [
    [{ ...ok, table: 'dro ver' }, 'changes[1].table'],
    [{ ...ok, table: '' }, 'changes[1].table'],
    [{ ...ok, table: 'x'.repeat(256) }, 'changes[1].table'],
    [{ ...ok, set: 'svc;flush ruleset' }, 'changes[1].set'],
    [{ ...ok, set: 'sv\u00e9' }, 'changes[1].set'],
    [{ ...ok, family: 'inet' as 'ip' }, 'changes[1].family'],
    [{ ...ok, op: 'flush' as 'add' }, 'changes[1].op'],
    [{ ...ok, elements: [{ key }, { key: Buffer.alloc(0) }] }, 'changes[1].elements[1].key'],
    [{ ...ok, elements: [{ key: Buffer.alloc(65) }] }, 'changes[1].elements[0].key'],
    [{ ...ok, elements: [{ key: 'x' as unknown as Buffer }] }, 'changes[1].elements[0].key'],
    [{ ...ok, elements: [{ key, data: Buffer.alloc(65) }] }, 'changes[1].elements[0].data'],
  ];
  for (const [change, field] of bad) {
    const err = t.throws(() => encodeSetElemBatch([ok, change], { firstSeq: 1 }), { instanceOf: NftValidationError });
    t.is(err?.field, field);
  }
  t.is(encodeSetElemBatch([ok, { ...ok, table: 'x'.repeat(255), set: 'a.b-c_D9' }], { firstSeq: 1 }).messages.length, 2, '255 characters of the allowed ones pass');
  t.throws(() => encodeSetElemBatch([ok], { firstSeq: -1 }), { instanceOf: NftValidationError, message: /firstSeq/ });
  t.throws(() => encodeSetElemBatch([ok], { firstSeq: 1, maxMessageBytes: 70000 }), { instanceOf: NftValidationError, message: /maxMessageBytes/ });
  t.throws(() => encodeGetSetElems({ ...ref('svc'), table: 'a/b' }, 1), { instanceOf: NftValidationError, message: /table/ });
  t.throws(() => encodeGetSetElems({ ...ref('svc'), family: 'arp' as 'ip' }, 1), { instanceOf: NftValidationError, message: /family/ });
});
