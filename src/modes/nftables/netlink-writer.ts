/**
 * nftables mode's element writer over nf_tables netlink (netlink/client.ts):
 * the element operations of a sync (model.ts ElementOp, as element texts)
 * turned into the kernel's key and value bytes (netlink/concat.ts) and sent
 * as one batch. It takes the plain sets and maps of the layout; the
 * interval set `firewall-allow` and the kernel-filled `affinity` map go
 * through `nft -f` (backend.ts asks {@link NetlinkElementWriter.accepts}).
 * It also reads the table back (netlink dumps of its structure and of its
 * sets' elements, for full syncs) and the ruleset's generation id (the
 * cheap drift check).
 *
 * One writer serves the table of one IP family: `ip drover` (NFPROTO_IPV4,
 * 4-byte addresses) or `ip6 drover` (NFPROTO_IPV6, 16-byte addresses in
 * network order, each a whole number of registers: nft's
 * netlink_gen_concat_data). An element whose address is of the other
 * family is refused before anything is sent.
 */
import type { IPFamily } from '../../model/types.ts';
import type { ElementWriter } from './backend.ts';
import { MAIN, LOCAL, HAIRPIN, AFFINITY_MAP, FIREWALL_ALLOW, MEMBERSHIP_SETS, countOfSet, nftFamily, timeoutOfSet } from './layout.ts';
import { ipPrefix, parseIP } from '../../model/addr.ts';
import type { ElementOp } from './model.ts';
import { UnsafeElementError } from './elements.ts';
import type { ConcatField, FieldKind } from '../../kernel/nftables/concat.ts';
import { decodeConcat, encodeConcat } from '../../kernel/nftables/concat.ts';
import type { NftNetlinkClient } from '../../kernel/nftables/client.ts';
import { encodeSetElemBatch, type SetElementChange } from '../../kernel/nftables/codec.ts';
import type { LiveTable } from './live.ts';
import { liveFromStructure } from './live-netlink.ts';

/** IANA protocol numbers of the protocols nft names (/etc/protocols). */
const PROTOCOLS: Readonly<Record<string, number>> = { tcp: 6, udp: 17, sctp: 132 };
const NAMES: Readonly<Record<number, string>> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };

/** The field layouts of one family's elements. */
interface Shapes {
  readonly frontend: readonly FieldKind[];
  readonly slotKey: readonly FieldKind[];
  readonly target: readonly FieldKind[];
  readonly hairpin: readonly FieldKind[];
}

function shapes(ip: 'ipv4' | 'ipv6'): Shapes {
  return { frontend: [ip, 'proto', 'port'], slotKey: [ip, 'proto', 'port', 'u32'], target: [ip, 'port'], hairpin: [ip, ip, 'proto', 'port'] };
}

const SHAPES: Readonly<Record<IPFamily, Shapes>> = { IPv4: shapes('ipv4'), IPv6: shapes('ipv6') };

/** An element's field layouts: its key's, and a map's value's. */
export interface ElementShape {
  readonly key: readonly FieldKind[];
  readonly value?: readonly FieldKind[];
}

/**
 * The key and value layouts of set `name` of the table of `family` (default IPv4) as netlink reads them: those it
 * writes, the kernel-filled affinity map, and the interval set firewall-allow (`frontend . client range`, whose
 * elements come as a first and a last key: {@link rangeText}).
 */
export function readShape(name: string, family: IPFamily = 'IPv4'): ElementShape | undefined {
  const s = SHAPES[family];
  if (name === AFFINITY_MAP) return { key: s.hairpin, value: s.target };
  if (name === FIREWALL_ALLOW) return { key: [...s.frontend, s.target[0]!] };
  return elementShape(name, family);
}

/**
 * Element text of the range of concatenations from `first` to `last` (inclusive, as the kernel dumps an element of a
 * concatenated interval set: NFTA_SET_ELEM_KEY and _KEY_END), field by field as nft lists it: a field whose first and
 * last value are the same as that value, an address range that is a prefix as `network/bits`, any other range as
 * `first-last`. So a `frontend . client range` element reads as firewallText (elements.ts) writes it.
 * @throws UnsafeElementError when the two keys have different shapes.
 */
export function rangeText(first: readonly ConcatField[], last: readonly ConcatField[]): string {
  if (first.length !== last.length) throw new UnsafeElementError('interval element', `${fieldsText(first)} - ${fieldsText(last)}`);
  return first
    .map((f, i) => {
      const a = fieldsText([f]);
      const b = fieldsText([last[i]!]);
      if (a === b) return a;
      const lo = parseIP(a);
      const hi = parseIP(b);
      if (lo && hi && lo.family === hi.family) {
        const span = (lo.value ^ hi.value) + 1n;
        const bits = (lo.family === 4 ? 32 : 128) - (span.toString(2).length - 1);
        if ((span & (span - 1n)) === 0n && (lo.value & (span - 1n)) === 0n && hi.value - lo.value === span - 1n) return ipPrefix(lo.family, lo.value, bits).text;
      }
      return `${a}-${b}`;
    })
    .join(' . ');
}

/** Element text of decoded concatenation fields (elements.ts): addresses, protocol names, numbers. */
export function fieldsText(fields: readonly ConcatField[]): string {
  return fields
    .map((f) => {
      if ('ipv4' in f) return f.ipv4;
      if ('proto' in f) return NAMES[f.proto] ?? String(f.proto);
      if ('port' in f) return String(f.port);
      if ('u32' in f) return String(f.u32);
      return f.ipv6;
    })
    .join(' . ');
}

/** The key and value layouts of set `name` of the table of `family` (default IPv4); undefined for one netlink does not write here. */
export function elementShape(name: string, family: IPFamily = 'IPv4'): ElementShape | undefined {
  const s = SHAPES[family];
  if (name === MAIN.map || name === LOCAL.map) return { key: s.slotKey, value: s.target };
  if (name === HAIRPIN) return { key: s.hairpin };
  if ((MEMBERSHIP_SETS as readonly string[]).includes(name) || countOfSet(name) !== undefined || timeoutOfSet(name) !== undefined) return { key: s.frontend };
  // firewall-allow (an interval set), the affinity map (filled by the kernel) and anything unknown.
  return undefined;
}

/**
 * The fields of element text `text` laid out as `kinds`.
 * @throws UnsafeElementError when the text does not have that shape.
 */
export function elementFields(text: string, kinds: readonly FieldKind[]): ConcatField[] {
  const parts = text.split(' . ');
  if (parts.length !== kinds.length) throw new UnsafeElementError('element', text);
  return kinds.map((kind, i): ConcatField => {
    const p = parts[i]!;
    switch (kind) {
      case 'ipv4':
        return { ipv4: p };
      case 'ipv6':
        return { ipv6: p };
      case 'proto': {
        const n = PROTOCOLS[p];
        if (n === undefined) throw new UnsafeElementError('protocol', p);
        return { proto: n };
      }
      case 'port':
        return { port: Number(p) };
      case 'u32':
        return { u32: Number(p) };
      default:
        throw new UnsafeElementError('element', text);
    }
  });
}

/**
 * The netlink batch of `ops` (ordered) for the table of `family` (default IPv4): one change per run of the same kind and set.
 * @throws UnsafeElementError for an element of another shape; NftValidationError (netlink/concat.ts) for an address of the other family.
 */
export function elementChanges(ops: readonly ElementOp[], family: IPFamily = 'IPv4'): SetElementChange[] {
  const table = nftFamily(family).table;
  const changes: SetElementChange[] = [];
  let current: { op: 'add' | 'delete'; set: string; elements: { key: Uint8Array; data?: Uint8Array }[] } | undefined;
  for (const op of ops) {
    const shape = elementShape(op.set, family);
    if (!shape) throw new UnsafeElementError('netlink set', op.set);
    if (!current || current.op !== op.op || current.set !== op.set) {
      current = { op: op.op, set: op.set, elements: [] };
      changes.push({ family: table.family, table: table.name, set: op.set, op: op.op, elements: current.elements });
    }
    const key = encodeConcat(elementFields(op.key, shape.key));
    const wantsData = op.op === 'add' && shape.value !== undefined;
    if (wantsData && op.value === undefined) throw new UnsafeElementError('map value', `${op.set} ${op.key}`);
    current.elements.push(wantsData ? { key, data: encodeConcat(elementFields(op.value!, shape.value!), 'data') } : { key });
  }
  return changes;
}

/** Bytes of the one datagram that carries `changes` (BATCH_BEGIN, the element messages, BATCH_END). */
export function batchBytes(changes: readonly SetElementChange[]): number {
  return encodeSetElemBatch(changes, { firstSeq: 1 }).bytes.length;
}

/** What the writer needs of an nf_tables netlink client (kernel/nftables/client.ts): `commit`, and for reading back the rest. */
export type NetlinkElementClient = Pick<NftNetlinkClient, 'commit'> & Partial<Pick<NftNetlinkClient, 'listElements' | 'readStructure' | 'generation' | 'close'>>;

/** Element writer over an open nf_tables netlink client, for the table of `family` (default IPv4). */
export class NetlinkElementWriter implements ElementWriter {
  constructor(
    private readonly client: NetlinkElementClient,
    private readonly family: IPFamily = 'IPv4',
  ) {}

  accepts(ops: readonly ElementOp[]): boolean {
    return ops.every((o) => elementShape(o.set, this.family) !== undefined);
  }

  async commit(ops: readonly ElementOp[]): Promise<number> {
    return (await this.client.commit(elementChanges(ops, this.family))).bytes;
  }

  /** The elements of `set` from a netlink dump, as element texts; undefined for a set it does not read (one not of drover's layout). */
  async read(set: string): Promise<Map<string, string | undefined> | undefined> {
    const shape = readShape(set, this.family);
    if (!shape || !this.client.listElements) return undefined;
    const table = nftFamily(this.family).table;
    const out = new Map<string, string | undefined>();
    for (const e of await this.client.listElements(table.family, table.name, set)) {
      const key = decodeConcat(e.key, shape.key);
      const text = e.keyEnd ? rangeText(key, decodeConcat(e.keyEnd, shape.key)) : fieldsText(key);
      out.set(text, e.data && shape.value ? fieldsText(decodeConcat(e.data, shape.value)) : undefined);
    }
    return out;
  }

  /** The table's chains, sets (without elements) and rules' comments from netlink dumps (live-netlink.ts); undefined when the client reads no structure. */
  async structure(): Promise<LiveTable | undefined> {
    if (!this.client.readStructure) return undefined;
    const table = nftFamily(this.family).table;
    return liveFromStructure(await this.client.readStructure(table.family, table.name));
  }

  generation(): Promise<number> {
    if (!this.client.generation) return Promise.reject(new Error('this netlink client reads no generation id'));
    return this.client.generation();
  }

  close(): void {
    this.client.close?.();
  }
}
