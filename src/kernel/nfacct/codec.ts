/**
 * The nfnetlink accounting messages (NFNL_SUBSYS_ACCT), pure: what
 * kube-proxy's pkg/util/nfacct/nfacct_linux.go sends and reads, from
 * include/uapi/linux/netfilter/nfnetlink_acct.h and the kernel's
 * net/netfilter/nfnetlink_acct.c:
 *
 * - every message is a struct nfgenmsg (family AF_UNSPEC, version
 *   NFNETLINK_V0, res_id 0) followed by attributes;
 * - NFNL_MSG_ACCT_NEW with NFACCT_NAME creates an object; with NLM_F_EXCL
 *   an existing one of that name answers EEXIST (without it, EBUSY; with
 *   NLM_F_REPLACE its counters would be reset, which drover never asks);
 * - NFNL_MSG_ACCT_GET with NFACCT_NAME answers one NFNL_MSG_ACCT_NEW
 *   message, or ENOENT; with NLM_F_DUMP and no attribute, one per object;
 * - NFACCT_NAME is a NUL-terminated string of at most NFACCT_NAME_MAX (32)
 *   bytes with its NUL; NFACCT_PKTS and NFACCT_BYTES are __be64.
 */
import { NfacctError, NfacctNameError } from '../../errors.ts';
import { AttrWriter, parseAttrs, attrString, type NlAttr } from '../netlink/nlattr.ts';
import type { Nfacct, NfacctCounter } from './types.ts';

/** The netlink protocol of nfnetlink (<linux/netlink.h>). */
export const NETLINK_NETFILTER = 12;
/** The accounting subsystem of nfnetlink (<linux/netfilter/nfnetlink.h>). */
export const NFNL_SUBSYS_ACCT = 7;
/** enum nfnl_acct_msg_types. */
export const NFNL_MSG_ACCT_NEW = 0;
export const NFNL_MSG_ACCT_GET = 1;
/** enum nfnl_acct_type. */
export const NFACCT_NAME = 1;
export const NFACCT_PKTS = 2;
export const NFACCT_BYTES = 3;
/** Bytes of a name with its NUL. */
export const NFACCT_NAME_MAX = 32;
/** <linux/netlink.h> request flags. */
export const NLM_F_DUMP = 0x300;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;

/** The names drover sends: 1 to NFACCT_NAME_MAX - 1 characters of a-z, 0-9 and _ (kube-proxy's two names are of this form). */
const NAME = new RegExp(`^[a-z0-9_]{1,${NFACCT_NAME_MAX - 1}}$`);

/**
 * `name` when it is one drover may send (see {@link NAME}); checked before
 * any message is built, so that no other text reaches the kernel.
 * @throws NfacctNameError otherwise.
 */
export function checkCounterName(name: unknown): string {
  if (typeof name !== 'string' || !NAME.test(name)) throw new NfacctNameError(name);
  return name;
}

/** The nlmsg_type of accounting command `cmd`. */
export function accountingType(cmd: number): number {
  return (NFNL_SUBSYS_ACCT << 8) | cmd;
}

/** struct nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 0 (big-endian). */
const NFGENMSG = Buffer.from([0, 0, 0, 0]);

/**
 * The payload of NFNL_MSG_ACCT_NEW or of a single NFNL_MSG_ACCT_GET for
 * `name`: nfgenmsg and NFACCT_NAME.
 * @throws NfacctNameError for a name {@link checkCounterName} refuses.
 */
export function encodeNameRequest(name: string): Buffer {
  return Buffer.concat([NFGENMSG, new AttrWriter().string(NFACCT_NAME, checkCounterName(name)).toBuffer()]);
}

/** The payload of a NFNL_MSG_ACCT_GET dump: nfgenmsg alone. */
export function encodeDumpRequest(): Buffer {
  return Buffer.from(NFGENMSG);
}

/** A __be64 payload, as a number (exact up to 2^53). */
function attrBe64(a: NlAttr | undefined, what: string): number {
  if (a === undefined) throw new NfacctError(`nfacct reply without ${what}`);
  if (a.data.length !== 8) throw new NfacctError(`nfacct reply: ${what} of ${a.data.length} bytes, not 8`);
  return Number(a.data.readBigUInt64BE(0));
}

/**
 * The object in the payload of one NFNL_MSG_ACCT_NEW reply (nfgenmsg and
 * attributes).
 * @throws NfacctError when the payload is short or lacks NFACCT_NAME, NFACCT_PKTS or NFACCT_BYTES; NetlinkDecodeError for a malformed attribute.
 */
export function decodeCounter(payload: Uint8Array): NfacctCounter {
  if (payload.length < NFGENMSG.length) throw new NfacctError(`nfacct reply of ${payload.length} bytes`);
  const attrs = new Map(parseAttrs(payload.subarray(NFGENMSG.length)).map((a) => [a.type, a]));
  const name = attrs.get(NFACCT_NAME);
  if (name === undefined) throw new NfacctError('nfacct reply without NFACCT_NAME');
  return { name: attrString(name, 'NFACCT_NAME'), packets: attrBe64(attrs.get(NFACCT_PKTS), 'NFACCT_PKTS'), bytes: attrBe64(attrs.get(NFACCT_BYTES), 'NFACCT_BYTES') };
}

/**
 * {@link Nfacct.ensureEach} over `ensure`: each name in turn.
 * @throws NfacctNameError for a refused name, before any call.
 */
export async function ensureEachOf(nfacct: Pick<Nfacct, 'ensure'>, names: readonly string[]): Promise<Map<string, Error | undefined>> {
  for (const n of names) checkCounterName(n);
  const out = new Map<string, Error | undefined>();
  for (const n of names) {
    try {
      await nfacct.ensure(n);
      out.set(n, undefined);
    } catch (err) {
      out.set(n, err as Error);
    }
  }
  return out;
}
