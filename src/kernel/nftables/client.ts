/**
 * An nf_tables client on one NETLINK_NETFILTER socket (transport.ts), using
 * codec.ts for every message: commit a batch of set element changes, list a
 * set's elements, read the ruleset generation, and read a table's structure
 * (its chains, sets and rules, structure-codec.ts).
 *
 * How the kernel answers (net/netfilter/nfnetlink.c nfnetlink_rcv_batch;
 * observed on Linux 6.18, in part checked by test/kernel/nft-netlink.test.ts):
 * - a batch is processed whole within the sendmsg() call, and applied only
 *   if every message succeeds; otherwise nothing is applied. The answers
 *   are queued at the end: an NLMSG_ERROR per element message (error 0 =
 *   ACK, we set NLM_F_ACK on each), including the ones that succeeded in an
 *   aborted batch (the kernel does not stop at the first error, so several
 *   may fail). A batch-level failure (no CAP_NET_ADMIN, a malformed batch,
 *   the commit itself failing) is instead ONE NLMSG_ERROR naming the
 *   BATCH_BEGIN's sequence number, and no per-message answers.
 *   So commit() resolves when every message is ACKed, and rejects with
 *   the first (lowest-sequence) failing message once all are answered, or
 *   at once on a batch-level error.
 * - ACKs are capped (NLM_F_CAPPED: only the request's header is copied
 *   back, 36 bytes); errors copy the whole failing request (the package
 *   cannot set NETLINK_CAP_ACK). All answers are queued during sendmsg(),
 *   before we read any, and an overflow of the receive buffer aborts the
 *   process (transport.ts): measured, 31 failing 64 KiB messages against a
 *   512 KiB SO_RCVBUF did. So commit() refuses a batch whose worst-case
 *   answers (every message failing) could exceed SO_RCVBUF
 *   (NftBatchTooLargeError; 62 failing 64 KiB messages fit the default 8 MiB).
 * - dumps answer with NLM_F_MULTI messages and NLMSG_DONE; a dump that the
 *   ruleset changed under is flagged NLM_F_DUMP_INTR and retried.
 *
 * Calls run one at a time (a netlink socket holds one dump at a time, and
 * answers are matched by sequence number). A call that goes `timeoutMs`
 * without an answer closes the client: late answers could otherwise be
 * taken for those of the next call. Open a new client then.
 *
 * The socket acts on the network namespace of the process that opens it
 * (run the process with `ip netns exec` to act on another one). Every
 * change needs CAP_NET_ADMIN there (EPERM otherwise).
 */
import { constants as osConstants } from 'node:os';
import { DroverError } from '../../errors.ts';
import {
  decodeAck,
  decodeDone,
  decodeGen,
  decodeSetElems,
  encodeGetGen,
  encodeGetSetElems,
  encodeSetElemBatch,
  familyNumber,
  checkName,
  nextSeq,
  nftType,
  parseMessages,
  type BatchMessage,
  type DumpedElement,
  type NftFamily,
  type NlMessage,
  type SetElementChange,
  type SetRef,
} from './codec.ts';
import { NFT_MSG, NFT_SET_F, NLMSG_DONE, NLMSG_ERROR, NLM_F } from './constants.ts';
import { encodeRuleBatch, type RuleAdd } from './rule-codec.ts';
import {
  decodeChain,
  decodeRule,
  decodeSet,
  decodeTableName,
  encodeGetTable,
  encodeStructureDump,
  structureAnswerType,
  type DumpedChain,
  type DumpedRule,
  type DumpedSet,
  type StructureKind,
} from './structure-codec.ts';
import { openNfnlTransport, type NfnlTransport } from './transport.ts';

/** Options of {@link NftNetlinkClient.open}. */
export interface NftClientOptions {
  /** How long a call may go without an answer from the kernel, ms (default 10 000). A timeout closes the client. */
  readonly timeoutMs?: number;
  /** SO_RCVBUF to request, bytes (default 8 MiB; capped at net.core.rmem_max). */
  readonly recvBufferBytes?: number;
  /** SO_SNDBUF to request, bytes (default 8 MiB; capped at net.core.wmem_max). */
  readonly sendBufferBytes?: number;
  /** Largest element message, bytes (default 65536). */
  readonly maxMessageBytes?: number;
}

/** What a successful commit sent. */
export interface CommitResult {
  /** Element messages in the batch (0: nothing was sent). */
  readonly messages: number;
  /** Elements added or deleted. */
  readonly elements: number;
  /** Size of the batch sent, bytes (0: nothing was sent). */
  readonly bytes: number;
}

/**
 * The kernel refused a request. For a batch, `message` is the first element
 * message that failed (which set, add or delete, which elements); it is
 * undefined for a failure of the batch as a whole (EPERM, the commit).
 * The whole batch was then discarded.
 */
export class NftRequestError extends DroverError {
  constructor(
    /** "add", "delete", "batch", "list", "generation", "rule" (a rule of {@link NftNetlinkClient.addRules}), or "structure" (a read of {@link NftNetlinkClient.readStructure}). */
    readonly op: 'add' | 'delete' | 'batch' | 'list' | 'generation' | 'rule' | 'structure',
    /** The set the request was about, if any. */
    readonly target: SetRef | undefined,
    /** errno name, e.g. "ENOENT"; "E?" and the number when Node does not know it. */
    readonly code: string,
    /** Positive errno. */
    readonly errno: number,
    /** The failing element message of a batch. */
    readonly batchMessage?: BatchMessage,
    /** For "rule": the rule refused, `family table chain "comment"`. */
    readonly rule?: string,
  ) {
    const what = op === 'rule' ? `adding rule ${rule ?? '?'}` : describe(op, target, batchMessage);
    const hint = ERRNO_HINTS[`${op} ${code}`] ?? ERRNO_HINTS[`* ${code}`];
    super(`nf_tables ${what} failed: ${code}${hint ? ` (${hint})` : ''}`);
    this.name = 'NftRequestError';
  }
}

/** A table's structure as one consistent read ({@link NftNetlinkClient.readStructure}). */
export interface TableStructure {
  /** False when the kernel has no such table (then everything else is empty). */
  readonly exists: boolean;
  /** Its chains, in the kernel's order (the order they were added). */
  readonly chains: readonly DumpedChain[];
  /** Its named sets and maps (anonymous sets left out), in the kernel's order. */
  readonly sets: readonly DumpedSet[];
  /** Its rules, chain by chain in the kernel's order, each chain's in their order. */
  readonly rules: readonly DumpedRule[];
  /** The ruleset generation id the read saw before and after it (NFT_MSG_GETGEN). */
  readonly generation: number;
}

/** The client was closed (by close(), a timeout or a socket error); open a new one. */
export class NftClientClosedError extends DroverError {
  constructor(readonly reason: string) {
    super(`nf_tables netlink client is closed: ${reason}`);
    this.name = 'NftClientClosedError';
  }
}

/** A call got no answer within the timeout; the client is closed. */
export class NftTimeoutError extends NftClientClosedError {
  constructor(what: string, timeoutMs: number) {
    super(`${what}: no answer from the kernel within ${timeoutMs} ms`);
    this.name = 'NftTimeoutError';
  }
}

/**
 * A batch whose answers might not fit the socket's receive buffer, or that
 * does not fit its send buffer; nothing was sent. Split the changes.
 */
export class NftBatchTooLargeError extends DroverError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`nf_tables batch of ${bytes} bytes is over this socket's limit of ${limit} bytes; commit the changes in smaller batches`);
    this.name = 'NftBatchTooLargeError';
  }
}

/** What errors mean per operation (net/netfilter/nf_tables_api.c nft_add_set_elem, nft_del_setelem, nf_tables_getsetelem). */
const ERRNO_HINTS: Readonly<Record<string, string>> = {
  'add ENOENT': 'no such table or set',
  'add EEXIST': 'an element with this key exists with other data',
  'add EINVAL': 'key or data does not fit the set',
  'add ENFILE': 'the set is full',
  'delete ENOENT': 'no such element, set or table',
  'delete EINVAL': 'key does not fit the set',
  'list ENOENT': 'no such table or set',
  'rule ENOENT': 'no such table, chain or set',
  'rule EINVAL': 'an expression the kernel does not take (a register or a length)',
  '* EPERM': 'CAP_NET_ADMIN is required',
};

function describe(op: string, target: SetRef | undefined, m: BatchMessage | undefined): string {
  const set = target ? `${target.family} ${target.table} ${target.set}` : '';
  if (m) return `${m.op} of ${m.count} element(s) ${m.op === 'add' ? 'to' : 'from'} set ${set} (batch message seq ${m.seq}, elements ${m.first}-${m.first + m.count - 1} of change ${m.change})`;
  if (op === 'list') return `listing of set ${set}`;
  if (op === 'generation') return 'GETGEN';
  if (op === 'structure') return 'read of a table\'s structure';
  return 'batch';
}

const ERRNO_NAMES = new Map<number, string>(Object.entries(osConstants.errno).map(([name, n]) => [n, name]));

/** The errno name of a positive errno ("E?" and the number when Node does not know it). */
export function errnoName(errno: number): string {
  return ERRNO_NAMES.get(errno) ?? `E?${errno}`;
}

/**
 * Estimated receive-buffer bytes the answers to one message can take: an
 * error copies the message back (into an skb whose truesize can be about
 * twice its data), an ACK's skb is under 1 KiB.
 */
function answerBudget(messageBytes: number): number {
  return 2048 + 2 * messageBytes;
}

/** {@link answerBudget} of every message of a batch: what its answers can take when every message fails. */
function batchAnswerBudget(messages: readonly { readonly bytes: number }[]): number {
  return messages.reduce((n, m) => n + answerBudget(m.bytes), 0);
}

/** The call in progress: handles the messages whose seq it owns. */
interface Pending {
  owns(seq: number): boolean;
  handle(msg: NlMessage): void;
}

/** An nf_tables client on one netlink socket. Create with {@link NftNetlinkClient.open}. */
export class NftNetlinkClient {
  private seq: number;
  private pending: Pending | undefined;
  private tail: Promise<unknown> = Promise.resolve();
  private closedReason: string | undefined;
  private failPending: ((err: Error) => void) | undefined;
  private readonly timeoutMs: number;
  private readonly maxMessageBytes: number | undefined;

  private constructor(
    private readonly transport: NfnlTransport,
    options: NftClientOptions,
  ) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    if (!Number.isInteger(this.timeoutMs) || this.timeoutMs < 1) throw new RangeError(`timeoutMs ${this.timeoutMs} must be a positive integer`);
    this.maxMessageBytes = options.maxMessageBytes;
    // Like nft (time(NULL)), start from the clock, so that answers to another socket's old requests are unlikely to match.
    this.seq = Math.floor(Date.now() / 1000) >>> 0 || 1;
    transport.onDatagram((d) => this.receive(d));
    transport.onError((err) => this.shutDown(`socket error: ${err.message}`));
  }

  /**
   * Open a NETLINK_NETFILTER socket in this process's network namespace.
   * @throws the package's ErrnoException when the socket cannot be created.
   */
  static async open(options: NftClientOptions = {}): Promise<NftNetlinkClient> {
    const transport = openNfnlTransport(options.recvBufferBytes ?? 8 * 1024 * 1024, options.sendBufferBytes ?? 8 * 1024 * 1024);
    return NftNetlinkClient.withTransport(transport, options);
  }

  /** Like {@link open} over a given transport (closed on failure). */
  static withTransport(transport: NfnlTransport, options: NftClientOptions = {}): NftNetlinkClient {
    try {
      return new NftNetlinkClient(transport, options);
    } catch (err) {
      transport.close();
      throw err;
    }
  }

  /**
   * Send `changes` as one atomic batch and wait until the kernel has
   * answered every message. Resolves when all of it was applied.
   * @throws NftValidationError (nothing sent) for bad input.
   * @throws NftBatchTooLargeError (nothing sent) when the batch or its
   *   answers would not fit the socket's buffers.
   * @throws NftRequestError naming the first failing message and its errno
   *   (the kernel then applied NONE of the batch), or the batch as a whole.
   * @throws NftClientClosedError / NftTimeoutError.
   */
  commit(changes: readonly SetElementChange[]): Promise<CommitResult> {
    return this.serial(async () => {
      const batch = encodeSetElemBatch(changes, { firstSeq: this.seq, ...(this.maxMessageBytes ? { maxMessageBytes: this.maxMessageBytes } : {}) });
      const elements = batch.messages.reduce((n, m) => n + m.count, 0);
      if (batch.messages.length === 0) return { messages: 0, elements: 0, bytes: 0 };
      const sendLimit = this.transport.sendBufferBytes() - 32;
      if (batch.bytes.length > sendLimit) throw new NftBatchTooLargeError(batch.bytes.length, sendLimit);
      const answers = batchAnswerBudget(batch.messages);
      const recvLimit = this.transport.recvBufferBytes();
      if (answers > recvLimit) throw new NftBatchTooLargeError(answers, recvLimit);
      this.seq = batch.nextSeq;

      await this.awaitBatch('commit', batch.bytes, batch.beginSeq, batch.messages, (failed, errno) =>
        new NftRequestError(failed.op, { family: failed.family, table: failed.table, set: failed.set }, errnoName(errno), errno, failed),
      );
      return { messages: batch.messages.length, elements, bytes: batch.bytes.length };
    });
  }

  /**
   * Append `rules` to their chains, or put each one with a `handle` in
   * place of that rule (NFT_MSG_NEWRULE, rule-codec.ts), and
   * wait until the kernel has answered every message: as one atomic batch
   * when it and its worst-case answers fit the socket's buffers, else split in halves, each its
   * own batch, in order (a batch is all or nothing; the batches together
   * are not: one that fails leaves the batches before it applied). For the
   * rules nft cannot write as drover means them (the modes' netlink-rules.ts),
   * written right after the `nft -f` that wrote their chains, which must not
   * be left short of rules because they would not fit one batch.
   * @returns the rules and bytes sent, and the batches (transactions) committed.
   * @throws NftValidationError (nothing sent) for bad input.
   * @throws NftBatchTooLargeError (nothing sent of it) when a single rule does not fit.
   * @throws NftRequestError "rule" naming the first rule the kernel refused,
   *   its chain and errno (the kernel then applied none of its batch).
   * @throws NftClientClosedError / NftTimeoutError.
   */
  addRules(rules: readonly RuleAdd[]): Promise<{ readonly rules: number; readonly bytes: number; readonly transactions: number }> {
    return this.serial(() => this.addRuleBatches(rules));
  }

  /** {@link addRules}, inside the call in progress. */
  private async addRuleBatches(rules: readonly RuleAdd[]): Promise<{ readonly rules: number; readonly bytes: number; readonly transactions: number }> {
    if (rules.length === 0) return { rules: 0, bytes: 0, transactions: 0 };
    const batch = encodeRuleBatch(rules, this.seq);
    const sendLimit = this.transport.sendBufferBytes() - 32;
    // The worst-case answers (every rule refused, each answer a copy of its request) must fit the receive buffer, as for commit().
    const answers = batchAnswerBudget(batch.messages);
    const recvLimit = this.transport.recvBufferBytes();
    if (batch.bytes.length > sendLimit || answers > recvLimit) {
      if (rules.length === 1) throw batch.bytes.length > sendLimit ? new NftBatchTooLargeError(batch.bytes.length, sendLimit) : new NftBatchTooLargeError(answers, recvLimit);
      const half = rules.length >> 1;
      const a = await this.addRuleBatches(rules.slice(0, half));
      const b = await this.addRuleBatches(rules.slice(half));
      return { rules: a.rules + b.rules, bytes: a.bytes + b.bytes, transactions: a.transactions + b.transactions };
    }
    this.seq = batch.nextSeq;
    await this.awaitBatch('rule batch', batch.bytes, batch.beginSeq, batch.messages, (failed, errno) => {
      const r = rules[failed.rule]!;
      return new NftRequestError('rule', undefined, errnoName(errno), errno, undefined, `${r.family} ${r.table} ${r.chain} "${r.comment}"`);
    });
    return { rules: rules.length, bytes: batch.bytes.length, transactions: 1 };
  }

  /**
   * Send a batch and wait for the kernel's answer to each of its
   * `messages`: resolves when every one was ACKed, rejects with `fail` of
   * the first (in batch order) that was not, or with a "batch" error when
   * the kernel refused the batch itself (its BATCH_BEGIN, `beginSeq`).
   */
  private async awaitBatch<M extends { readonly seq: number }>(what: string, bytes: Buffer, beginSeq: number, messages: readonly M[], fail: (failed: M, errno: number) => Error): Promise<void> {
    const bySeq = new Map(messages.map((m) => [m.seq, m]));
    const answered = new Map<number, number>(); // seq → errno (0 = ACK)
    await this.exchange(what, bytes, (msg, settle) => {
      if (msg.type !== NLMSG_ERROR) return;
      const ack = decodeAck(msg);
      if (ack.seq === beginSeq && ack.error !== 0) {
        settle(new NftRequestError('batch', undefined, errnoName(ack.error), ack.error));
        return;
      }
      if (!bySeq.has(ack.seq)) return;
      answered.set(ack.seq, ack.error);
      if (answered.size < bySeq.size) return;
      const failed = messages.find((m) => answered.get(m.seq) !== 0);
      settle(failed ? fail(failed, answered.get(failed.seq)!) : undefined);
    }, (seq) => seq === beginSeq || bySeq.has(seq));
  }

  /**
   * Every element of one set or map (an NFT_MSG_GETSETELEM dump), in the
   * kernel's order (hash order for hash sets). Retries a dump the ruleset
   * changed under (NLM_F_DUMP_INTR) up to 3 times.
   * @throws NftValidationError for a bad family or name.
   * @throws NftRequestError "list" with ENOENT when the table or set does not exist.
   * @throws NftClientClosedError / NftTimeoutError.
   */
  listElements(family: NftFamily, table: string, set: string): Promise<DumpedElement[]> {
    const ref: SetRef = { family, table, set };
    try {
      familyNumber(family);
      checkName(table, 'table');
      checkName(set, 'set');
    } catch (err) {
      return Promise.reject(err);
    }
    return this.serial(async () => {
      for (let attempt = 1; ; attempt++) {
        const seq = this.takeSeq();
        const fail = (errno: number): Error => new NftRequestError('list', ref, errnoName(errno), errno);
        const { items: out, interrupted } = await this.dump('list', encodeGetSetElems(ref, seq), seq, nftType(NFT_MSG.NEWSETELEM), decodeSetElems, fail);
        if (!interrupted) return out;
        if (attempt === 3) throw new NftRequestError('list', ref, 'EINTR', osConstants.errno.EINTR);
      }
    });
  }

  /**
   * The ruleset generation id of this network namespace (NFT_MSG_GETGEN):
   * a u32 that every committed batch, of any process, increases. A cheap
   * check of whether anything changed since it was last read.
   * @throws NftRequestError "generation"; NftClientClosedError / NftTimeoutError.
   */
  generation(): Promise<number> {
    return this.serial(() => this.readGeneration());
  }

  /** {@link generation}, inside the call in progress. */
  private async readGeneration(): Promise<number> {
    const seq = this.takeSeq();
    let gen = 0;
    await this.exchange('generation', encodeGetGen(seq), (msg, settle) => {
      if (msg.type === nftType(NFT_MSG.NEWGEN)) {
        gen = decodeGen(msg);
        settle();
      } else if (msg.type === NLMSG_ERROR) {
        const ack = decodeAck(msg);
        if (ack.error !== 0) settle(new NftRequestError('generation', undefined, errnoName(ack.error), ack.error));
      }
    }, (s) => s === seq);
    return gen;
  }

  /**
   * The structure of table `family table`: whether it exists, its chains,
   * named sets and maps (without their elements: {@link listElements}) and
   * rules (structure-codec.ts), what `nft list table` reads. One GETTABLE
   * and three dumps, between two reads of the generation id: when the
   * generation moved, or a dump was interrupted (NLM_F_DUMP_INTR), another
   * program's transaction came in between, and it reads again, up to 3
   * times; so the chains, sets and rules returned are of one generation.
   * @throws NftValidationError for a bad family or name.
   * @throws NftRequestError "structure" (EINTR when the ruleset kept changing, else the kernel's errno).
   * @throws NftClientClosedError / NftTimeoutError.
   */
  readStructure(family: NftFamily, table: string): Promise<TableStructure> {
    try {
      familyNumber(family);
      checkName(table, 'table');
    } catch (err) {
      return Promise.reject(err);
    }
    return this.serial(async () => {
      for (let attempt = 1; ; attempt++) {
        const before = await this.readGeneration();
        const exists = await this.tableExists(family, table);
        const chains = exists ? await this.dumpStructure('chains', family, table, decodeChain) : { items: [], interrupted: false };
        const sets = exists ? await this.dumpStructure('sets', family, table, decodeSet) : { items: [], interrupted: false };
        const rules = exists ? await this.dumpStructure('rules', family, table, decodeRule) : { items: [], interrupted: false };
        const after = await this.readGeneration();
        if (before === after && !chains.interrupted && !sets.interrupted && !rules.interrupted) {
          return {
            exists,
            chains: chains.items,
            sets: sets.items.filter((s) => (s.flags & NFT_SET_F.ANONYMOUS) === 0),
            rules: rules.items,
            generation: after,
          };
        }
        if (attempt === 3) throw new NftRequestError('structure', undefined, 'EINTR', osConstants.errno.EINTR);
      }
    });
  }

  /** Whether table `family table` exists (NFT_MSG_GETTABLE), inside the call in progress. */
  private async tableExists(family: NftFamily, table: string): Promise<boolean> {
    const seq = this.takeSeq();
    let found = false;
    await this.exchange('structure', encodeGetTable(family, table, seq), (msg, settle) => {
      if (msg.type === nftType(NFT_MSG.NEWTABLE)) found = decodeTableName(msg) === table;
      else if (msg.type === NLMSG_ERROR) {
        const ack = decodeAck(msg);
        if (ack.error === 0) settle();
        else if (ack.error === osConstants.errno.ENOENT) {
          found = false;
          settle();
        } else settle(new NftRequestError('structure', undefined, errnoName(ack.error), ack.error));
      }
    }, (s) => s === seq);
    return found;
  }

  /** One dump of the chains, sets or rules of a table, those of other tables left out, inside the call in progress. */
  private dumpStructure<T extends { readonly table: string }>(kind: StructureKind, family: NftFamily, table: string, decode: (msg: NlMessage) => T): Promise<{ items: T[]; interrupted: boolean }> {
    const seq = this.takeSeq();
    const mine = (msg: NlMessage): T[] => {
      const item = decode(msg);
      return item.table === table ? [item] : [];
    };
    const fail = (errno: number): Error => new NftRequestError('structure', undefined, errnoName(errno), errno);
    return this.dump('structure', encodeStructureDump(kind, family, table, seq), seq, structureAnswerType(kind), mine, fail);
  }

  /**
   * One dump, inside the call in progress: send `request` (sequence number
   * `seq`), decode every answer of message type `answer` until NLMSG_DONE,
   * and say whether the kernel flagged it NLM_F_DUMP_INTR (the ruleset
   * changed during it). Rejects with `fail` of the errno of an
   * NLMSG_ERROR or of a failed NLMSG_DONE.
   */
  private async dump<T>(what: string, request: Buffer, seq: number, answer: number, decode: (msg: NlMessage) => T[], fail: (errno: number) => Error): Promise<{ items: T[]; interrupted: boolean }> {
    const items: T[] = [];
    let interrupted = false;
    await this.exchange(what, request, (msg, settle) => {
      if (msg.flags & NLM_F.DUMP_INTR) interrupted = true;
      if (msg.type === answer) items.push(...decode(msg));
      else if (msg.type === NLMSG_ERROR) {
        const ack = decodeAck(msg);
        settle(ack.error === 0 ? undefined : fail(ack.error));
      } else if (msg.type === NLMSG_DONE) {
        const errno = decodeDone(msg);
        settle(errno === 0 ? undefined : fail(errno));
      }
    }, (s) => s === seq);
    return { items, interrupted };
  }

  /** Close the socket; pending and later calls reject with NftClientClosedError. Idempotent. */
  close(): void {
    this.shutDown('closed');
  }

  // -------------------------------------------------------------------------

  private takeSeq(): number {
    const s = this.seq;
    this.seq = nextSeq(s);
    return s;
  }

  /** Run calls one at a time, in order. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      if (this.closedReason !== undefined) throw new NftClientClosedError(this.closedReason);
      return fn();
    };
    const p = this.tail.then(run, run);
    this.tail = p.catch(() => undefined);
    return p;
  }

  /**
   * Send `datagram` and feed every received message with a seq that `owns`
   * accepts to `handle` until it calls settle(). Times out (closing the
   * client) after timeoutMs without an answer.
   */
  private exchange(what: string, datagram: Buffer, handle: (msg: NlMessage, settle: (err?: Error) => void) => void, owns: (seq: number) => boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let done = false;
      const settle = (err?: Error): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.pending = undefined;
        this.failPending = undefined;
        if (err) reject(err);
        else resolve();
      };
      /** When the kernel last answered this call (performance.now(), ms). */
      let last = performance.now();
      // The call fails after timeoutMs without an answer, not after timeoutMs in all: a dump of a large set (100,000
      // elements at 10,000 service ports) is answered in many datagrams, which a busy process reads for longer. And
      // answers that came while the process was blocked are read first (the poll phase runs before setImmediate's),
      // so that a timer due during a long synchronous stretch does not fail a call the kernel has answered.
      const expire = (): void => {
        setImmediate(() => {
          if (done) return;
          const idle = performance.now() - last;
          if (idle < this.timeoutMs) {
            timer = setTimeout(expire, this.timeoutMs - idle);
            return;
          }
          const err = new NftTimeoutError(what, this.timeoutMs);
          settle(err);
          this.shutDown(err.reason);
        });
      };
      let timer = setTimeout(expire, this.timeoutMs);
      this.failPending = settle;
      this.pending = {
        owns,
        handle: (msg) => {
          last = performance.now();
          try {
            handle(msg, settle);
          } catch (err) {
            // An answer we cannot read: the socket's state is unknown from here on.
            settle(err as Error);
            this.shutDown(`${what}: ${(err as Error).message}`);
          }
        },
      };
      // Through a promise also when send() throws at once (a closed socket).
      Promise.resolve()
        .then(() => this.transport.send(datagram))
        .catch((err: Error) => settle(new DroverError(`nf_tables ${what}: send failed: ${err.message}`, { cause: err })));
    });
  }

  private receive(datagram: Buffer): void {
    let msgs: NlMessage[];
    try {
      msgs = parseMessages(datagram);
    } catch (err) {
      this.shutDown(`unreadable datagram: ${(err as Error).message}`);
      return;
    }
    for (const m of msgs) {
      const p = this.pending;
      if (p && p.owns(m.seq)) p.handle(m);
      // Anything else is a late answer to an abandoned call: dropped.
    }
  }

  private shutDown(reason: string): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    this.failPending?.(new NftClientClosedError(reason));
    this.transport.close();
  }
}
