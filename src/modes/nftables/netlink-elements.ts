/**
 * nftables mode's element operations (model.ts ElementOp, whose keys and
 * values are the element texts of elements.ts) as nf_tables netlink set
 * element changes (netlink/codec.ts), and an ElementWriter that commits
 * them over one NftNetlinkClient, as one batch: one kernel transaction.
 *
 * Each set's field kinds come from its declaration in layout.ts (the key
 * and value types as `nft -j` names them): `ipv4_addr`, `inet_proto`,
 * `inet_service`, and the `integer` of a slot (`numgen random mod N`, a
 * u32 in host byte order, netlink/concat.ts). Interval sets
 * (`firewall-allow`) need interval-end elements that the codec does not
 * encode: a batch that touches one is written with `nft -f` instead, still
 * as one transaction.
 */
import type { ElementWriter } from './backend.ts';
import type { NftExec } from './exec.ts';
import { TABLE, affinitySet, countOfSet, countSet, fixedSets, timeoutOfSet, type SetDecl } from './layout.ts';
import type { ElementOp } from './model.ts';
import { encodeConcat, type ConcatField, type FieldKind } from './netlink/concat.ts';
import { encodeSetElemBatch, type SetElementChange } from './netlink/codec.ts';
import { elementLines } from './script.ts';
import { UnsafeElementError } from './elements.ts';

/** The field kind of each nft type drover's sets use. */
const TYPE_KINDS: Readonly<Record<string, FieldKind>> = { ipv4_addr: 'ipv4', inet_proto: 'proto', inet_service: 'port', integer: 'u32' };

/** IP protocol numbers of the protocols elements name. */
const PROTOCOLS: Readonly<Record<string, number>> = { tcp: 6, udp: 17, sctp: 132 };

/** The declaration of drover's set or map `name` (layout.ts); undefined for a name the layout never makes. */
export function setDeclOf(name: string): SetDecl | undefined {
  const fixed = fixedSets().find((s) => s.name === name);
  if (fixed) return fixed;
  const count = countOfSet(name);
  if (count) return countSet(count.sel, count.n);
  const timeout = timeoutOfSet(name);
  return timeout !== undefined ? affinitySet(timeout) : undefined;
}

/** True when set `name` is an interval set (its elements need interval ends, which netlink/codec.ts does not encode). */
export function isIntervalSet(name: string): boolean {
  return setDeclOf(name)?.body.includes('flags interval') ?? false;
}

function kindsOf(type: string): FieldKind[] {
  return type.split(' . ').map((t) => {
    const k = TYPE_KINDS[t];
    if (!k) throw new UnsafeElementError('set type', type);
    return k;
  });
}

/** The concatenation fields of element text `text` (`10.96.0.10 . tcp . 80 . 3`) of kinds `kinds`. @throws UnsafeElementError when it does not fit. */
function fieldsOf(text: string, kinds: readonly FieldKind[]): ConcatField[] {
  const parts = text.split(' . ');
  if (parts.length !== kinds.length) throw new UnsafeElementError('element', text);
  return parts.map((p, i): ConcatField => {
    const kind = kinds[i]!;
    if (kind === 'ipv4') return { ipv4: p };
    if (kind === 'proto') {
      const n = PROTOCOLS[p];
      if (n === undefined) throw new UnsafeElementError('protocol', p);
      return { proto: n };
    }
    if (!/^[0-9]+$/.test(p)) throw new UnsafeElementError('element', text);
    return kind === 'port' ? { port: Number(p) } : { u32: Number(p) };
  });
}

/**
 * `ops` (in the order given) as set element changes of table ip drover:
 * one change per run of the same operation on the same set.
 * @throws UnsafeElementError for a set the layout does not declare, an
 *   interval set, or an element that does not fit its set's type;
 *   NftValidationError (netlink/concat.ts) for a value out of range.
 */
export function elementChanges(ops: readonly ElementOp[]): SetElementChange[] {
  const out: Array<SetElementChange & { elements: { key: Uint8Array; data?: Uint8Array }[] }> = [];
  for (const o of ops) {
    const decl = setDeclOf(o.set);
    if (!decl || isIntervalSet(o.set)) throw new UnsafeElementError('netlink set', o.set);
    const key = encodeConcat(fieldsOf(o.key, kindsOf(decl.keyType)));
    const data = o.op === 'add' && decl.mapType !== undefined ? encodeConcat(fieldsOf(o.value ?? '', kindsOf(decl.mapType))) : undefined;
    const last = out[out.length - 1];
    const element = data ? { key, data } : { key };
    if (last && last.op === o.op && last.set === o.set) last.elements.push(element);
    else out.push({ family: TABLE.family, table: TABLE.name, set: o.set, op: o.op, elements: [element] });
  }
  return out;
}

/** Bytes of the one datagram that carries `changes` (BATCH_BEGIN, the element messages, BATCH_END). */
export function batchBytes(changes: readonly SetElementChange[]): number {
  return encodeSetElemBatch(changes, { firstSeq: 1 }).bytes.length;
}

/** What the writer needs of an nf_tables netlink client (netlink/client.ts NftNetlinkClient). */
export interface ElementCommitter {
  /** Commit `changes` as one atomic batch. @throws NftRequestError naming the first failing message. */
  commit(changes: readonly SetElementChange[]): Promise<unknown>;
}

/**
 * The ElementWriter of nftables mode over nf_tables netlink: `ops` in one
 * batch through `client`, or, when they touch an interval set, as one
 * `nft -f` script through `nft`. Returns the bytes sent (the datagram, or
 * the script).
 */
export function netlinkElementWriter(client: ElementCommitter, nft: NftExec): ElementWriter {
  return {
    async commit(ops) {
      if (ops.some((o) => isIntervalSet(o.set))) {
        const script = `${elementLines(ops).join('\n')}\n`;
        await nft.run(script);
        return Buffer.byteLength(script);
      }
      const changes = elementChanges(ops);
      await client.commit(changes);
      return batchBytes(changes);
    },
  };
}
