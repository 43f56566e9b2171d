/**
 * Graceful termination of real servers, after kube-proxy's
 * pkg/proxy/ipvs/graceful_termination.go. Pure: the backend keeps the
 * pending list and feeds in the kernel's connection counters and the time.
 *
 * When an endpoint goes away, its real server is not deleted at once (that
 * would break its open connections, as the kernel drops a connection whose
 * destination is gone when net.ipv4.vs.expire_nodest_conn=1):
 *
 * 1. it is quiesced: weight 0, so that it gets no new connection, and it is
 *    put on the pending list;
 * 2. it is deleted once its active + inactive connections reach 0, or once
 *    it has been pending for the graceful period (`--ipvs-graceful-period`,
 *    default 15 min; kube-proxy has no such bound);
 * 3. if the endpoint comes back while pending, it is restored to weight 1
 *    and leaves the list.
 *
 * UDP and SCTP real servers are deleted at once, as kube-proxy does
 * (IsRsGracefulTerminationNeeded): their flows have no close to wait for.
 * A real server with no connection at all is deleted at once too (kube-proxy
 * tries the delete before quiescing).
 */
import type { DestEntry, IpvsProtocol, RealServerKey, VirtualServerKey } from '../../kernel/ipvs/codec.ts';
import { realServerKey, virtualServerKey } from './desired.ts';

/** A real server waiting to be deleted. */
export interface PendingRemoval {
  readonly vs: VirtualServerKey;
  readonly rs: RealServerKey;
  /** When it was first quiesced, ms since the epoch. */
  readonly since: number;
}

/** Pending removals by {@link pendingKey}. */
export type PendingList = ReadonlyMap<string, PendingRemoval>;

/** The key of a pending removal: "TCP/10.96.0.10:80 -> 10.244.1.2:8080". */
export function pendingKey(vs: VirtualServerKey, rs: RealServerKey): string {
  return `${virtualServerKey(vs)} -> ${realServerKey(rs)}`;
}

/** True when a real server of this protocol is drained before deletion (TCP), false when it is deleted at once (UDP, SCTP). */
export function needsGracefulTermination(protocol: IpvsProtocol): boolean {
  return protocol === 'TCP';
}

/** What to do with a real server that is no longer wanted. */
export type RemovalDecision =
  /** Delete it now. */
  | 'delete'
  /** Set its weight to 0 and keep it pending. */
  | 'quiesce'
  /** Already at weight 0 and pending: leave it. */
  | 'wait';

/**
 * Decide the fate of an unwanted real server.
 * @param pending its entry on the pending list, if it has one
 * @param now ms since the epoch
 * @param periodMs the graceful period, ms (0: delete at once)
 */
export function removalDecision(
  protocol: IpvsProtocol,
  dest: Pick<DestEntry, 'weight' | 'activeConns' | 'inactiveConns'>,
  pending: PendingRemoval | undefined,
  now: number,
  periodMs: number,
): RemovalDecision {
  if (!needsGracefulTermination(protocol)) return 'delete';
  if (dest.activeConns + dest.inactiveConns === 0) return 'delete';
  if (periodMs <= 0) return 'delete';
  if (pending && now - pending.since >= periodMs) return 'delete';
  return dest.weight === 0 ? 'wait' : 'quiesce';
}

/** The outcome of a periodic check of the pending list. */
export interface GracefulCheck {
  /** Real servers to delete now. */
  readonly deletes: readonly PendingRemoval[];
  /** The pending list afterwards. */
  readonly pending: Map<string, PendingRemoval>;
}

/**
 * The periodic check (kube-proxy's tryDeleteRs): for each pending real
 * server, with the kernel's current destinations of its virtual server,
 * decide to delete it (connections drained or period over), keep it, or
 * forget it (it, or its virtual server, is gone already). Pure.
 * @param dests current destinations per virtual server key; a missing key means the virtual server is gone
 */
export function checkPending(
  pending: PendingList,
  dests: ReadonlyMap<string, readonly DestEntry[]>,
  now: number,
  periodMs: number,
): GracefulCheck {
  const next = new Map<string, PendingRemoval>();
  const deletes: PendingRemoval[] = [];
  for (const [key, p] of pending) {
    const dest = dests.get(virtualServerKey(p.vs))?.find((d) => d.address === p.rs.address && d.port === p.rs.port);
    if (!dest) continue;
    const decision = removalDecision(p.vs.protocol, dest, p, now, periodMs);
    if (decision === 'delete') deletes.push(p);
    else next.set(key, p);
  }
  return { deletes, pending: next };
}
