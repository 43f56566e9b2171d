/**
 * nf_tables notifications assembled into committed batches, for the tables
 * a caller watches.
 *
 * net/netfilter/nf_tables_api.c nf_tables_commit announces a batch to the
 * NFNLGRP_NFTABLES group as one message per object it changed
 * (nf_tables_table_notify, nf_tables_chain_notify, nf_tables_rule_notify,
 * nf_tables_set_notify, nf_tables_setelem_notify, …: NFT_MSG_NEW* or
 * NFT_MSG_DEL*), packed several to a datagram, and ends it with one
 * NFT_MSG_NEWGEN (nf_tables_gen_notify) carrying the new generation id and
 * the committing process's pid and name. Each object message has the
 * table's family in its nfgenmsg and the table's name as its first
 * attribute, type 1 for every kind (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE,
 * NFTA_RULE_TABLE, NFTA_SET_TABLE, NFTA_SET_ELEM_LIST_TABLE, NFTA_OBJ_TABLE,
 * NFTA_FLOWTABLE_TABLE; include/uapi/linux/netfilter/nf_tables.h).
 *
 * A full sync announces hundreds of thousands of elements, so the scan is
 * cheap: per message it reads the 16-byte header, the family byte and the
 * attribute headers up to the table name, compares that name's bytes with
 * the watched names (no string is made unless it matches), and decodes a
 * chain or set name only for a watched table, keeping each distinct change
 * once. It never throws: a malformed message is reported as `unknown`.
 */
import { readU16 } from '../netlink/nlattr.ts';
import { NFGENMSG_LEN, NFNL_SUBSYS_NFTABLES, NFT_MSG, NLMSG_HDRLEN } from './constants.ts';
import { readGenCommit, walkNotifications, type GenCommit } from './notify.ts';

/** A table to watch: its NFPROTO_* family (<linux/netfilter.h>: 2 for `ip`, 10 for `ip6`) and name. */
export interface WatchedTable {
  readonly family: number;
  readonly name: string;
}

/** The kind of an nf_tables object a notification is about. */
export type NftObjectKind = 'table' | 'chain' | 'rule' | 'set' | 'element' | 'object' | 'flowtable';

/** One kind of change a batch made to a watched table (each distinct change once, however many objects it covers). */
export interface NftObjectChange {
  readonly kind: NftObjectKind;
  readonly op: 'add' | 'delete';
  /** The chain (a chain, a rule) or set (a set, an element) named in the message; absent for a table, an object, a flowtable. */
  readonly name?: string;
}

/** One committed batch that touched at least one watched table: its NEWGEN (pid: the kernel's task_pid_nr, the pid in the initial pid namespace), and what it touched. */
export interface NftCommittedBatch extends GenCommit {
  /** The watched tables it touched, by {@link tableKey}, each with its changes in the order first seen. */
  readonly tables: ReadonlyMap<string, readonly NftObjectChange[]>;
}

/** What a datagram completed: a batch touching watched tables, or something the scan could not read (then: read everything back). */
export type NftBatchEvent = { readonly type: 'batch'; readonly batch: NftCommittedBatch } | { readonly type: 'unknown'; readonly reason: string };

/** Counts kept by a {@link BatchAssembler}. */
export interface BatchScanStats {
  /** Netlink messages read. */
  messages: number;
  /** Batches committed (NEWGEN read). */
  batches: number;
  /** Of those, batches that touched a watched table. */
  watchedBatches: number;
  /** Messages or datagrams that could not be read. */
  malformed: number;
}

const FAMILY_NAMES: ReadonlyMap<number, string> = new Map([
  [1, 'inet'],
  [2, 'ip'],
  [3, 'arp'],
  [5, 'netdev'],
  [7, 'bridge'],
  [10, 'ip6'],
]);

/** `ip drover`, `ip6 drover`: a table as nft names it (an unknown family as `family N`). */
export function tableKey(family: number, name: string): string {
  return `${FAMILY_NAMES.get(family) ?? `family ${family}`} ${name}`;
}

/** Per message type (NFT_MSG_*): the kind, the operation, and the attribute type of the chain or set name (0: none). */
const OBJECT_MESSAGES: ReadonlyMap<number, { kind: NftObjectKind; op: 'add' | 'delete'; nameAttr: number }> = new Map([
  [NFT_MSG.NEWTABLE, { kind: 'table', op: 'add', nameAttr: 0 }],
  [NFT_MSG.DELTABLE, { kind: 'table', op: 'delete', nameAttr: 0 }],
  // NFTA_CHAIN_NAME = 3 (NFTA_CHAIN_HANDLE is 2).
  [NFT_MSG.NEWCHAIN, { kind: 'chain', op: 'add', nameAttr: 3 }],
  [NFT_MSG.DELCHAIN, { kind: 'chain', op: 'delete', nameAttr: 3 }],
  // NFTA_RULE_CHAIN = 2.
  [NFT_MSG.NEWRULE, { kind: 'rule', op: 'add', nameAttr: 2 }],
  [NFT_MSG.DELRULE, { kind: 'rule', op: 'delete', nameAttr: 2 }],
  // NFTA_SET_NAME = 2.
  [NFT_MSG.NEWSET, { kind: 'set', op: 'add', nameAttr: 2 }],
  [NFT_MSG.DELSET, { kind: 'set', op: 'delete', nameAttr: 2 }],
  // NFTA_SET_ELEM_LIST_SET = 2.
  [NFT_MSG.NEWSETELEM, { kind: 'element', op: 'add', nameAttr: 2 }],
  [NFT_MSG.DELSETELEM, { kind: 'element', op: 'delete', nameAttr: 2 }],
  // NFT_MSG_NEWOBJ 18, DELOBJ 20, NEWFLOWTABLE 22, DELFLOWTABLE 24.
  [18, { kind: 'object', op: 'add', nameAttr: 0 }],
  [20, { kind: 'object', op: 'delete', nameAttr: 0 }],
  [22, { kind: 'flowtable', op: 'add', nameAttr: 0 }],
  [24, { kind: 'flowtable', op: 'delete', nameAttr: 0 }],
  // NFT_MSG_DESTROY* (26-32: table, chain, rule, set, element, object, flowtable), should a kernel announce them as such.
  [26, { kind: 'table', op: 'delete', nameAttr: 0 }],
  [27, { kind: 'chain', op: 'delete', nameAttr: 3 }],
  [28, { kind: 'rule', op: 'delete', nameAttr: 2 }],
  [29, { kind: 'set', op: 'delete', nameAttr: 2 }],
  [30, { kind: 'element', op: 'delete', nameAttr: 2 }],
  [31, { kind: 'object', op: 'delete', nameAttr: 0 }],
  [32, { kind: 'flowtable', op: 'delete', nameAttr: 0 }],
]);

const NLA_HDRLEN = 4;
const NLA_TYPE_MASK = 0x3fff;
/** The table-name attribute of every object message (NFTA_*_TABLE). */
const TABLE_ATTR = 1;

/**
 * Reads the group's datagrams in order and reports each committed batch
 * that touched a watched table when its NEWGEN arrives; see the module
 * comment. A batch's messages may span several datagrams: the batch in
 * progress is kept between calls, and dropped by {@link reset} (after lost
 * notifications).
 */
export class BatchAssembler {
  /** Counts since the assembler was made. */
  readonly stats: BatchScanStats = { messages: 0, batches: 0, watchedBatches: 0, malformed: 0 };
  /** Watched names, NUL-terminated as the kernel sends them, per family. */
  private readonly names: Map<number, Array<{ bytes: Buffer; key: string }>> = new Map();
  /** The batch in progress: watched table → change key → change. */
  private touched = new Map<string, Map<string, NftObjectChange>>();

  /** @param tables the tables to report (family and name). */
  constructor(tables: readonly WatchedTable[]) {
    for (const t of tables) {
      const list = this.names.get(t.family) ?? [];
      list.push({ bytes: Buffer.from(`${t.name}\0`, 'latin1'), key: tableKey(t.family, t.name) });
      this.names.set(t.family, list);
    }
  }

  /** Forget the batch in progress (its start was lost). */
  reset(): void {
    this.touched = new Map();
  }

  /**
   * Read one datagram of the group. Never throws: a message that cannot be
   * read gives an `unknown` event (and the rest of a datagram whose
   * message lengths cannot be trusted is skipped).
   * @returns the batches completed in it that touched a watched table, and anything unreadable, in order.
   */
  feed(datagram: Uint8Array): NftBatchEvent[] {
    const b = Buffer.from(datagram.buffer, datagram.byteOffset, datagram.byteLength);
    const out: NftBatchEvent[] = [];
    const malformed = walkNotifications(b, (type, off, len) => {
      this.stats.messages++;
      if (type >> 8 !== NFNL_SUBSYS_NFTABLES) return;
      const msg = type & 0xff;
      const event = msg === NFT_MSG.NEWGEN ? this.commit(b, off, len) : this.object(b, off, len, msg);
      if (event) out.push(event);
    });
    if (malformed !== undefined) out.push(this.malformed(malformed));
    return out;
  }

  /** A NEWGEN: the batch in progress ends. */
  private commit(b: Buffer, off: number, len: number): NftBatchEvent | undefined {
    this.stats.batches++;
    const touched = this.touched;
    this.touched = new Map();
    let commit: GenCommit | undefined;
    try {
      commit = readGenCommit(b, off, len);
    } catch (err) {
      return this.malformed(`malformed NEWGEN: ${(err as Error).message}`);
    }
    if (commit === undefined) return this.malformed('NEWGEN without a 4-byte NFTA_GEN_ID');
    if (touched.size === 0) return undefined;
    this.stats.watchedBatches++;
    const tables = new Map<string, NftObjectChange[]>();
    for (const [key, changes] of touched) tables.set(key, [...changes.values()]);
    return { type: 'batch', batch: { ...commit, tables } };
  }

  /** An object message: note it when its table is watched. */
  private object(b: Buffer, off: number, len: number, msg: number): NftBatchEvent | undefined {
    const what = OBJECT_MESSAGES.get(msg);
    if (what === undefined) return undefined;
    if (len < NLMSG_HDRLEN + NFGENMSG_LEN) return this.malformed(`${what.kind} message of ${len} bytes: no nfgenmsg`);
    const watched = this.names.get(b[off + NLMSG_HDRLEN]!);
    if (watched === undefined) return undefined;
    const end = off + len;
    let a = off + NLMSG_HDRLEN + NFGENMSG_LEN;
    let table: { start: number; len: number } | undefined;
    let name: { start: number; len: number } | undefined;
    while (end - a >= NLA_HDRLEN && (table === undefined || (what.nameAttr !== 0 && name === undefined))) {
      const alen = readU16(b, a);
      if (alen < NLA_HDRLEN || a + alen > end) return this.malformed(`${what.kind} message: attribute of ${alen} bytes at offset ${a - off}`);
      const atype = readU16(b, a + 2) & NLA_TYPE_MASK;
      if (atype === TABLE_ATTR) table = { start: a + NLA_HDRLEN, len: alen - NLA_HDRLEN };
      else if (atype === what.nameAttr) name = { start: a + NLA_HDRLEN, len: alen - NLA_HDRLEN };
      a += (alen + 3) & ~3;
    }
    if (table === undefined) return this.malformed(`${what.kind} message without its table name`);
    const hit = watched.find((w) => w.bytes.length <= table.len && b.compare(w.bytes, 0, w.bytes.length, table.start, table.start + w.bytes.length) === 0);
    if (hit === undefined) return undefined;
    let changes = this.touched.get(hit.key);
    if (changes === undefined) this.touched.set(hit.key, (changes = new Map()));
    let objectName: string | undefined;
    if (name !== undefined) {
      const nul = b.indexOf(0, name.start);
      objectName = b.toString('latin1', name.start, nul >= 0 && nul < name.start + name.len ? nul : name.start + name.len);
    }
    const key = `${what.kind} ${what.op} ${objectName ?? ''}`;
    if (!changes.has(key)) changes.set(key, { kind: what.kind, op: what.op, ...(objectName !== undefined ? { name: objectName } : {}) });
    return undefined;
  }

  private malformed(reason: string): NftBatchEvent {
    this.stats.malformed++;
    return { type: 'unknown', reason };
  }
}
