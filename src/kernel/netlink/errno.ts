/**
 * Reading the errno of a failed kernel request, and the predicates drover
 * decides with: "is it already there", "is it already gone", "was it refused
 * for lack of privilege".
 *
 * Where the errno comes from:
 * - netlink requests through the npm package `netlink@0.3.0` (generic
 *   netlink for IPVS, rtnetlink for links and addresses) reject with
 *   `Error("Request rejected: ENOENT")`, or "Request rejected: -523" for an
 *   errno Node has no name for (read as "E?523"), see {@link netlinkErrorCode};
 * - IpvsRequestError (modes/ipvs/netlink.ts) carries the name in `code`;
 * - Node's system-call errors (NodeJS.ErrnoException) carry it in `code` too.
 *
 * The errno numbers are those of include/uapi/asm-generic/errno-base.h
 * (EPERM 1, ENOENT 2, ESRCH 3, EACCES 13, EEXIST 17, ENODEV 19) and
 * include/uapi/asm-generic/errno.h (EADDRNOTAVAIL 99), which every Linux
 * architecture drover runs on uses.
 *
 * What they mean for IPVS, from the generic netlink handlers in
 * net/netfilter/ipvs/ip_vs_ctl.c:
 * - ESRCH: the virtual service does not exist (ip_vs_genl_set_cmd for every
 *   command but NEW_SERVICE, ip_vs_genl_get_cmd for GET_SERVICE);
 * - ENOENT: the destination does not exist (ip_vs_edit_dest for SET_DEST,
 *   ip_vs_del_dest for DEL_DEST), or NEW_SERVICE/SET_SERVICE name a
 *   scheduler or persistence engine that is not there (ip_vs_add_service,
 *   ip_vs_edit_service);
 *   generic netlink also answers ENOENT for a family it does not know (an
 *   unknown name in CTRL_CMD_GETFAMILY: the kernel has no IPVS);
 * - EEXIST: NEW_SERVICE for a service, or NEW_DEST for a destination, that
 *   is already there;
 * - EPERM: the caller lacks CAP_NET_ADMIN (every IPVS command is
 *   GENL_ADMIN_PERM; rtnetlink changes check it the same way).
 */
import type { constants as osConstants } from 'node:os';

/** An errno name Node knows, e.g. "ENOENT" (the keys of os.constants.errno). */
export type ErrnoName = keyof typeof osConstants.errno;

/**
 * The errno name in an error of `netlink@0.3.0`, whose request() rejects
 * with `Error("Request rejected: ENOENT")` (or "Request rejected: -523" for
 * an errno Node has no name for, which gives "E?523").
 * @returns undefined for any other error (timeouts, socket errors).
 */
export function netlinkErrorCode(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  const m = /^Request rejected: (\S+)$/.exec(err.message);
  if (!m || m[1] === undefined) return undefined;
  const code = m[1];
  return /^-?\d+$/.test(code) ? `E?${Math.abs(Number(code))}` : code;
}

/**
 * The errno name an error carries: its string `code` when that is an errno
 * name ("ENOENT", or "E?523" for one Node does not know), as
 * IpvsRequestError and Node's system-call errors have it, otherwise what
 * {@link netlinkErrorCode} reads from the netlink package's message.
 * @returns undefined when `err` carries no errno (a timeout, an exit status, not an Error).
 */
export function errnoName(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && /^E[A-Z0-9]+$|^E\?\d+$/.test(code)) return code;
  return netlinkErrorCode(err);
}

/** True when `err` carries one of the errno names `codes` (see {@link errnoName}). */
export function isErrno(err: unknown, ...codes: readonly ErrnoName[]): boolean {
  const name = errnoName(err);
  return name !== undefined && (codes as readonly string[]).includes(name);
}

/**
 * The object the request names is not there: ENOENT or ESRCH. For IPVS:
 * no such destination, scheduler or family (ENOENT), no such service
 * (ESRCH); for a file: no such file (ENOENT). Use {@link isNoSuchService}
 * where only a missing virtual service may be taken as "absent".
 */
export function isNotFound(err: unknown): boolean {
  return isErrno(err, 'ENOENT', 'ESRCH');
}

/**
 * IPVS: the virtual service the command names does not exist (ESRCH, from
 * ip_vs_genl_set_cmd and ip_vs_genl_get_cmd). Unlike {@link isNotFound} it
 * leaves out ENOENT, which for a service command means a missing scheduler
 * or an unknown generic netlink family, not a missing service.
 */
export function isNoSuchService(err: unknown): boolean {
  return isErrno(err, 'ESRCH');
}

/** What the request creates is already there: EEXIST (IPVS NEW_SERVICE/NEW_DEST, rtnetlink NEWLINK/NEWADDR with NLM_F_EXCL). */
export function isExists(err: unknown): boolean {
  return isErrno(err, 'EEXIST');
}

/**
 * The kernel refused for lack of privilege: EPERM, which netlink answers
 * when the caller lacks CAP_NET_ADMIN. EACCES (a denial by a security
 * module such as SELinux, not a missing capability) is not included.
 */
export function isPermission(err: unknown): boolean {
  return isErrno(err, 'EPERM');
}
