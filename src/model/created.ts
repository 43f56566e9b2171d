/**
 * When a Service was created, and the precedence it gives: the order in
 * which Services claim their frontends (claims.ts). The API server hands
 * out ClusterIPs and NodePorts one Service at a time and refuses a second
 * claimant, so the Service created first is the one a cluster would have
 * kept; drover decides every clash that way, in every mode and command and
 * across restarts, whatever order the objects arrive in.
 *
 * The time is `metadata.creationTimestamp` of a Kubernetes object (RFC
 * 3339, as metav1.Time encodes it; the Kubernetes client's lists hand it
 * over as a Date) or `metadata.created_at` of a Shepherd one (Go's
 * time.Time in RFC 3339 with nanoseconds). Go's zero time
 * ("0001-01-01T00:00:00Z", what an unset time.Time encodes to) counts as
 * none.
 */
import { compareStrings } from './order.ts';

/** RFC 3339 date-time: date, `T` (or `t`, or a space), time, optional fraction, and `Z` or an offset. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** Go's zero time.Time, ms since the epoch: an object that carries it has no time. */
const GO_ZERO_TIME_MS = Date.parse('0001-01-01T00:00:00Z');

/**
 * Read a creation time: `value` is the field as the object has it. Returns
 * `{ ms }` (milliseconds since the epoch; finer fractions are dropped)
 * for an RFC 3339 string or a valid Date, `{}` when there is none (absent,
 * null, "", Go's zero time), or `{ problem }` naming what is wrong.
 */
export function readCreationTime(value: unknown): { readonly ms?: number } | { readonly problem: string } {
  if (value === undefined || value === null || value === '') return {};
  let ms: number;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'string' && RFC3339.test(value)) ms = Date.parse(value.replace(' ', 'T').toUpperCase());
  else return { problem: `${typeof value === 'string' ? JSON.stringify(value.slice(0, 64)) : typeof value} is not an RFC 3339 time (e.g. "2025-03-02T10:14:07Z")` };
  if (!Number.isFinite(ms)) return { problem: `${JSON.stringify(String(value).slice(0, 64))} is not a valid time` };
  return ms === GO_ZERO_TIME_MS ? {} : { ms };
}

/** What {@link compareByCreation} orders: a Service's creation time (ms, absent when unknown) and its "namespace/name". */
export interface Created {
  readonly createdAt?: number | undefined;
  readonly key: string;
}

/**
 * Precedence of two Services, first one first: a Service with a creation
 * time before one without; of two with one, the earlier; then by
 * "namespace/name" (compareStrings). A total order: the same Services
 * always sort the same way.
 */
export function compareByCreation(a: Created, b: Created): number {
  if (a.createdAt !== b.createdAt) {
    if (a.createdAt === undefined) return 1;
    if (b.createdAt === undefined) return -1;
    return a.createdAt - b.createdAt;
  }
  return compareStrings(a.key, b.key);
}

/**
 * Why `winner` goes before `loser` ({@link compareByCreation}), for a
 * message: "created earlier", "it has a creationTimestamp and the other
 * has none", or "first by namespace/name".
 */
export function precedenceReason(winner: Created, loser: Created): string {
  if (winner.createdAt !== undefined && loser.createdAt !== undefined && winner.createdAt !== loser.createdAt) return 'created earlier';
  if (winner.createdAt !== undefined && loser.createdAt === undefined) return 'which has a creation time and this one has none';
  return 'first by namespace/name';
}
