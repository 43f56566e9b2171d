/**
 * NftNetlinkClient over a fake transport that answers as the kernel does
 * (net/netfilter/nfnetlink.c nfnetlink_rcv_batch; the real thing is in
 * test/kernel/nft-netlink.test.ts): when answers count as complete, which
 * error is reported, timeouts and closing.
 */
import test from 'ava';
import { encodeConcat } from '../../src/kernel/nftables/concat.ts';
import {
  NftBatchTooLargeError,
  NftClientClosedError,
  NftNetlinkClient,
  NftRequestError,
  NftTimeoutError,
} from '../../src/kernel/nftables/client.ts';
import { nftType, parseMessages, type NlMessage, type SetElementChange } from '../../src/kernel/nftables/codec.ts';
import { NFNL_MSG_BATCH_BEGIN, NFT_MSG, NLMSG_DONE, NLMSG_ERROR, NLM_F } from '../../src/kernel/nftables/constants.ts';
import type { NfnlTransport } from '../../src/kernel/nftables/transport.ts';
import { encodeRuleBatch, type RuleAdd } from '../../src/kernel/nftables/rule-codec.ts';
import { NftValidationError } from '../../src/kernel/nftables/errors.ts';
import { capture } from '../support/nft-captures.ts';

/** A netlink message (host-order header) with `payload`. */
function nlmsg(type: number, flags: number, seq: number, payload: Buffer): Buffer {
  const b = Buffer.alloc(16 + payload.length);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE(type, 4);
  b.writeUInt16LE(flags, 6);
  b.writeUInt32LE(seq, 8);
  payload.copy(b, 16);
  return b;
}

/** The kernel's NLMSG_ERROR for `req`: errno 0 is an ACK (capped). */
function ack(req: NlMessage, errno = 0): Buffer {
  const p = Buffer.alloc(20);
  p.writeInt32LE(-errno, 0);
  p.writeUInt32LE(16 + req.payload.length, 4);
  p.writeUInt16LE(req.type, 8);
  p.writeUInt16LE(req.flags, 10);
  p.writeUInt32LE(req.seq, 12);
  return nlmsg(NLMSG_ERROR, errno === 0 ? NLM_F.CAPPED : 0, req.seq, p);
}

/** One NEWSETELEM dump message with a single 4-byte key `k`. */
function dumpMsg(seq: number, k: number, flags: number = NLM_F.MULTI): Buffer {
  const key = Buffer.alloc(4);
  key.writeUInt32BE(k, 0);
  // nfgenmsg, then ELEMENTS { LIST_ELEM { KEY { VALUE } } } without NLA_F_NESTED, as the kernel sends.
  const value = Buffer.concat([Buffer.from([8, 0, 1, 0]), key]);
  const keyNest = Buffer.concat([Buffer.from([12, 0, 1, 0]), value]);
  const elem = Buffer.concat([Buffer.from([16, 0, 1, 0]), keyNest]);
  const list = Buffer.concat([Buffer.from([20, 0, 3, 0]), elem]);
  return nlmsg(nftType(NFT_MSG.NEWSETELEM), flags, seq, Buffer.concat([Buffer.from([2, 0, 0, 0]), list]));
}

function done(seq: number, errno = 0): Buffer {
  const p = Buffer.alloc(4);
  p.writeInt32LE(-errno, 0);
  return nlmsg(NLMSG_DONE, NLM_F.MULTI, seq, p);
}

/** A fake transport; `kernel` maps each sent datagram's messages to answer datagrams (delivered asynchronously, in order). */
class FakeTransport implements NfnlTransport {
  sent: NlMessage[][] = [];
  closed = false;
  private onData: (d: Buffer) => void = () => undefined;
  private onErr: (e: Error) => void = () => undefined;
  constructor(
    private readonly kernel: (msgs: NlMessage[], call: number) => Buffer[],
    readonly rcvbuf = 8 << 20,
    readonly sndbuf = 8 << 20,
    /** Between two answer datagrams, ms (0: the next turn of the event loop). */
    readonly gapMs = 0,
  ) {}
  send(d: Buffer): Promise<void> {
    const msgs = parseMessages(Buffer.from(d));
    this.sent.push(msgs);
    const answers = this.kernel(msgs, this.sent.length - 1);
    const deliver = (i: number): void => {
      if (i >= answers.length || this.closed) return;
      this.onData(answers[i]!);
      if (this.gapMs > 0) setTimeout(() => deliver(i + 1), this.gapMs);
      else setImmediate(() => deliver(i + 1));
    };
    setImmediate(() => deliver(0));
    return Promise.resolve();
  }
  onDatagram(h: (d: Buffer) => void): void {
    this.onData = h;
  }
  onError(h: (e: Error) => void): void {
    this.onErr = h;
  }
  fail(err: Error): void {
    this.onErr(err);
  }
  recvBufferBytes(): number {
    return this.rcvbuf;
  }
  sendBufferBytes(): number {
    return this.sndbuf;
  }
  close(): void {
    this.closed = true;
  }
}

const key = (i: number) => encodeConcat([{ ipv4: `10.96.0.${i}` }, { proto: 6 }, { port: 80 }]);
const CHANGES: SetElementChange[] = [
  { op: 'add', family: 'ip', table: 'drover', set: 'svc', elements: [{ key: key(1) }] },
  { op: 'delete', family: 'ip', table: 'drover', set: 'svc', elements: [{ key: key(2) }] },
  { op: 'add', family: 'ip', table: 'drover', set: 'bk', elements: [{ key: key(3), data: key(4) }] },
];

const elementMsgs = (msgs: NlMessage[]) => msgs.filter((m) => m.type === nftType(NFT_MSG.NEWSETELEM) || m.type === nftType(NFT_MSG.DELSETELEM));

test('commit resolves once every element message is ACKed', async (t) => {
  const fake = new FakeTransport((msgs) => elementMsgs(msgs).map((m) => ack(m)));
  const c = NftNetlinkClient.withTransport(fake);
  t.deepEqual(await c.commit(CHANGES), { messages: 3, elements: 3, bytes: fake.sent[0]!.reduce((n, m) => n + 16 + m.payload.length, 0) });
  t.is(fake.sent.length, 1, 'one datagram');
  t.is(fake.sent[0]![0]!.type, NFNL_MSG_BATCH_BEGIN);
  c.close();
  t.true(fake.closed);
});

test('an empty commit sends nothing', async (t) => {
  const fake = new FakeTransport(() => []);
  const c = NftNetlinkClient.withTransport(fake);
  t.deepEqual(await c.commit([{ ...CHANGES[0]!, elements: [] }]), { messages: 0, elements: 0, bytes: 0 });
  t.is(fake.sent.length, 0);
});

test('with several failures, commit reports the first message of the batch, after every message was answered', async (t) => {
  // The kernel goes on after a failure; answers arrive here in reverse order.
  const fake = new FakeTransport((msgs) => {
    const [a, d, b] = elementMsgs(msgs);
    return [ack(b!, 17), ack(a!), ack(d!, 2)];
  });
  const c = NftNetlinkClient.withTransport(fake);
  const err = await t.throwsAsync(c.commit(CHANGES), { instanceOf: NftRequestError });
  t.is(err?.op, 'delete');
  t.is(err?.code, 'ENOENT');
  t.is(err?.errno, 2);
  t.deepEqual(err?.target, { family: 'ip', table: 'drover', set: 'svc' });
  t.is(err?.batchMessage?.change, 1);
  t.regex(err!.message, /delete of 1 element\(s\) from set ip drover svc .*ENOENT/);
  // The client stays usable.
  const fake2Answers = await c.commit([]).then(() => 'ok');
  t.is(fake2Answers, 'ok');
});

test('a batch-level error (on BATCH_BEGIN) rejects at once, naming the batch', async (t) => {
  const fake = new FakeTransport((msgs) => [ack(msgs[0]!, 1)]);
  const c = NftNetlinkClient.withTransport(fake);
  const err = await t.throwsAsync(c.commit(CHANGES), { instanceOf: NftRequestError });
  t.is(err?.op, 'batch');
  t.is(err?.code, 'EPERM');
  t.regex(err!.message, /CAP_NET_ADMIN/);
});

test('no answer within the timeout rejects and closes the client; later calls reject as closed', async (t) => {
  const fake = new FakeTransport((msgs) => [ack(elementMsgs(msgs)[0]!)]); // the other two are never answered
  const c = NftNetlinkClient.withTransport(fake, { timeoutMs: 50 });
  await t.throwsAsync(c.commit(CHANGES), { instanceOf: NftTimeoutError, message: /commit: no answer .* 50 ms/ });
  t.true(fake.closed);
  await t.throwsAsync(c.generation(), { instanceOf: NftClientClosedError });
});

test('the timeout is for a call without an answer: a dump answered in many datagrams may take longer in all', async (t) => {
  // Ten answers 40 ms apart take longer than the timeout in all; each comes well within it (margin for a loaded machine's timers).
  const fake = new FakeTransport((msgs) => [...Array.from({ length: 10 }, (_, k) => dumpMsg(msgs[0]!.seq, k)), done(msgs[0]!.seq)], 8 << 20, 8 << 20, 40);
  const c = NftNetlinkClient.withTransport(fake, { timeoutMs: 300 });
  const start = performance.now();
  t.is((await c.listElements('ip', 'drover', 'svc')).length, 10);
  t.true(performance.now() - start > 300, 'ten answers 40 ms apart');
  t.false(fake.closed);
});

test('a socket error closes the client and rejects the call in progress', async (t) => {
  const fake = new FakeTransport(() => []);
  const c = NftNetlinkClient.withTransport(fake, { timeoutMs: 5000 });
  const p = c.generation();
  setImmediate(() => fake.fail(new Error('ENOBUFS')));
  await t.throwsAsync(p, { instanceOf: NftClientClosedError, message: /socket error: ENOBUFS/ });
  t.true(fake.closed);
});

test('a batch whose answers may not fit the receive buffer is refused before anything is sent', async (t) => {
  const fake = new FakeTransport(() => [], 4096);
  const c = NftNetlinkClient.withTransport(fake);
  await t.throwsAsync(c.commit(CHANGES), { instanceOf: NftBatchTooLargeError });
  t.is(fake.sent.length, 0);
  const small = new FakeTransport(() => [], 8 << 20, 200);
  await t.throwsAsync(NftNetlinkClient.withTransport(small).commit(CHANGES), { instanceOf: NftBatchTooLargeError });
});

test('listElements collects a dump, retries one flagged NLM_F_DUMP_INTR, ignores stale answers', async (t) => {
  const fake = new FakeTransport((msgs, call) => {
    const seq = msgs[0]!.seq;
    if (call === 0) return [dumpMsg(seq, 1, NLM_F.MULTI | NLM_F.DUMP_INTR), done(seq)];
    return [dumpMsg(seq - 1, 99), Buffer.concat([dumpMsg(seq, 1), dumpMsg(seq, 2)]), done(seq)];
  });
  const c = NftNetlinkClient.withTransport(fake);
  const got = await c.listElements('ip', 'drover', 'svc');
  t.deepEqual(
    got.map((e) => e.key.readUInt32BE(0)),
    [1, 2],
  );
  t.is(fake.sent.length, 2);
  t.is(fake.sent[1]![0]!.flags, NLM_F.REQUEST | NLM_F.DUMP);
});

test('listElements and generation reject with the errno the kernel answers', async (t) => {
  const fake = new FakeTransport((msgs) => [ack(msgs[0]!, 2)]);
  const c = NftNetlinkClient.withTransport(fake);
  const err = await t.throwsAsync(c.listElements('ip', 'drover', 'nope'), { instanceOf: NftRequestError });
  t.is(err?.op, 'list');
  t.is(err?.code, 'ENOENT');
  t.regex(err!.message, /set ip drover nope/);
  await t.throwsAsync(c.generation(), { instanceOf: NftRequestError, message: /GETGEN failed: ENOENT/ });
});

test('generation reads NFTA_GEN_ID from the NEWGEN answer', async (t) => {
  const fake = new FakeTransport((msgs) => {
    const p = Buffer.from([0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 1, 2]);
    return [nlmsg(nftType(NFT_MSG.NEWGEN), 0, msgs[0]!.seq, p)];
  });
  t.is(await NftNetlinkClient.withTransport(fake).generation(), 0x102);
});

test('calls run one at a time, in order', async (t) => {
  const order: number[] = [];
  const fake = new FakeTransport((msgs) => {
    order.push(msgs[0]!.type);
    const seq = msgs[0]!.seq;
    if (msgs[0]!.type === nftType(NFT_MSG.GETGEN)) return [nlmsg(nftType(NFT_MSG.NEWGEN), 0, seq, Buffer.from([0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 7]))];
    return [done(seq)];
  });
  const c = NftNetlinkClient.withTransport(fake);
  const [a, b, g] = await Promise.all([c.listElements('ip', 'drover', 'svc'), c.listElements('ip6', 'drover', 'svc'), c.generation()]);
  t.deepEqual([a, b, g], [[], [], 7]);
  t.deepEqual(order, [nftType(NFT_MSG.GETSETELEM), nftType(NFT_MSG.GETSETELEM), nftType(NFT_MSG.GETGEN)]);
});

test('bad names are refused before anything is sent', async (t) => {
  const fake = new FakeTransport(() => []);
  const c = NftNetlinkClient.withTransport(fake);
  await t.throwsAsync(c.listElements('ip', 'drover', 'a b'), { message: /set/ });
  await t.throwsAsync(c.commit([{ ...CHANGES[0]!, table: 'x;y' }]), { message: /changes\[0\]\.table/ });
  t.is(fake.sent.length, 0);
});

test('addRules that do not fit one batch are sent in halves, each its own batch within the send buffer, in order', async (t) => {
  const rule = (i: number): RuleAdd => ({ family: 'ip6', table: 'drover', chain: 'affinity-output', exprs: [{ kind: 'meta', key: 16, dreg: 16 }], comment: `rule ${i} ${'x'.repeat(200)}` });
  const rules = Array.from({ length: 6 }, (_, i) => rule(i));
  const whole = encodeRuleBatch(rules, 0).bytes.length;
  const one = encodeRuleBatch([rules[0]!], 0).bytes.length;
  // Room for two rules a batch, not three.
  const sndbuf = 32 + encodeRuleBatch(rules.slice(0, 2), 0).bytes.length + 8;
  t.true(whole > sndbuf && one < sndbuf);
  const fake = new FakeTransport((msgs) => msgs.filter((m) => m.type === nftType(NFT_MSG.NEWRULE)).map((m) => ack(m)), 8 << 20, sndbuf);
  const c = NftNetlinkClient.withTransport(fake);
  const r = await c.addRules(rules);
  t.is(r.rules, 6);
  t.is(r.transactions, fake.sent.length);
  t.true(fake.sent.length >= 3, `${fake.sent.length} batches`);
  const sentComments = fake.sent.flatMap((msgs) => msgs.filter((m) => m.type === nftType(NFT_MSG.NEWRULE)).map((m) => /rule (\d)/.exec(m.payload.toString('latin1'))![1]));
  t.deepEqual(sentComments, ['0', '1', '2', '3', '4', '5'], 'every rule once, in order');
  for (const msgs of fake.sent) t.true(msgs.reduce((n, m) => n + 16 + m.payload.length, 0) <= sndbuf - 32);
  const tooBig = NftNetlinkClient.withTransport(new FakeTransport(() => [], 8 << 20, one));
  await t.throwsAsync(tooBig.addRules([rules[0]!]), { instanceOf: NftBatchTooLargeError }, 'a single rule over the limit cannot be split');
});

test('addRules whose worst-case answers would not fit the receive buffer are split too', async (t) => {
  const rule = (i: number): RuleAdd => ({ family: 'ip6', table: 'drover', chain: 'affinity-output', exprs: [{ kind: 'meta', key: 16, dreg: 16 }], comment: `rule ${i}` });
  const rules = Array.from({ length: 8 }, (_, i) => rule(i));
  // Room in the receive buffer for the answers of about three rules (2 KiB each and twice the request).
  const fake = new FakeTransport((msgs) => msgs.filter((m) => m.type === nftType(NFT_MSG.NEWRULE)).map((m) => ack(m)), 3 * 2048 + 2 * encodeRuleBatch(rules.slice(0, 3), 0).bytes.length);
  const c = NftNetlinkClient.withTransport(fake);
  const r = await c.addRules(rules);
  t.is(r.rules, 8);
  t.is(r.transactions, 4, 'four batches of two');
  t.deepEqual(fake.sent.map((msgs) => msgs.filter((m) => m.type === nftType(NFT_MSG.NEWRULE)).length), [2, 2, 2, 2]);
});

/** A fake kernel holding the table of test/fixtures/nftables/list-structure.hex, whose generation id is `gen()` at each GETGEN. */
function structureKernel(gen: () => number, table = true): (msgs: NlMessage[]) => Buffer[] {
  const answers = capture('list-structure')
    .filter((d) => d.dir === 'recv')
    .flatMap((d) => parseMessages(d.bytes));
  const of = (msg: number) => answers.filter((m) => m.type === nftType(msg));
  const reseq = (m: NlMessage, seq: number) => nlmsg(m.type, m.flags, seq, m.payload);
  return (msgs) =>
    msgs.flatMap((m) => {
      switch (m.type) {
        case nftType(NFT_MSG.GETGEN): {
          const p = Buffer.from([0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 0]);
          p.writeUInt32BE(gen(), 8);
          return [nlmsg(nftType(NFT_MSG.NEWGEN), 0, m.seq, p)];
        }
        case nftType(NFT_MSG.GETTABLE):
          return table ? [reseq(of(NFT_MSG.NEWTABLE)[0]!, m.seq), ack(m)] : [ack(m, 2)];
        case nftType(NFT_MSG.GETCHAIN):
          return [...of(NFT_MSG.NEWCHAIN).map((a) => reseq(a, m.seq)), done(m.seq)];
        case nftType(NFT_MSG.GETSET):
          return [...of(NFT_MSG.NEWSET).map((a) => reseq(a, m.seq)), done(m.seq)];
        case nftType(NFT_MSG.GETRULE):
          return [...of(NFT_MSG.NEWRULE).map((a) => reseq(a, m.seq)), done(m.seq)];
        default:
          return [ack(m, 95)];
      }
    });
}

/** The message types sent, by their nf_tables message number. */
const sentKinds = (fake: FakeTransport): number[] => fake.sent.flatMap((d) => d.map((m) => m.type & 0xff));

test('readStructure reads the table, its chains, sets and rules between two equal generation ids', async (t) => {
  const fake = new FakeTransport(structureKernel(() => 7));
  const c = NftNetlinkClient.withTransport(fake);
  const s = await c.readStructure('ip', 'drover');
  t.true(s.exists);
  t.is(s.generation, 7);
  t.deepEqual(s.chains.map((ch) => ch.name), ['nat-prerouting', 'filter-output', 'services']);
  t.deepEqual(s.sets.map((set) => set.name), ['svc', 'bk', 'frontends', 'affinity']);
  t.deepEqual(s.rules.map((r) => r.comment), ['services', 'not a frontend with endpoints', null]);
  t.deepEqual(sentKinds(fake), [NFT_MSG.GETGEN, NFT_MSG.GETTABLE, NFT_MSG.GETCHAIN, NFT_MSG.GETSET, NFT_MSG.GETRULE, NFT_MSG.GETGEN]);
  c.close();
});

test('readStructure reads again when the generation moved during the read, and gives up with EINTR when it keeps moving', async (t) => {
  let n = 0;
  const once = new FakeTransport(structureKernel(() => (n++ === 0 ? 1 : 2)));
  const c = NftNetlinkClient.withTransport(once);
  t.is((await c.readStructure('ip', 'drover')).generation, 2);
  t.is(sentKinds(once).filter((k) => k === NFT_MSG.GETTABLE).length, 2, 'read twice');
  c.close();
  let m = 0;
  const moving = NftNetlinkClient.withTransport(new FakeTransport(structureKernel(() => m++)));
  await t.throwsAsync(moving.readStructure('ip', 'drover'), { instanceOf: NftRequestError, message: /EINTR/ });
  moving.close();
});

test('readStructure of a table the kernel does not have: exists false, nothing dumped; bad names sent nowhere', async (t) => {
  const fake = new FakeTransport(structureKernel(() => 3, false));
  const c = NftNetlinkClient.withTransport(fake);
  t.deepEqual(await c.readStructure('ip', 'drover'), { exists: false, chains: [], sets: [], rules: [], generation: 3 });
  t.deepEqual(sentKinds(fake), [NFT_MSG.GETGEN, NFT_MSG.GETTABLE, NFT_MSG.GETGEN]);
  await t.throwsAsync(c.readStructure('ip', 'no such'), { instanceOf: NftValidationError });
  t.is(fake.sent.length, 3);
  c.close();
});
