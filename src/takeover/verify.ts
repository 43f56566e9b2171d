/**
 * `drover takeover`, step 3: before anything is removed, every frontend of
 * the desired state must go to the same endpoints through the old state as
 * through the new one. Both are walked by drover's trace engine
 * (inspect/trace.ts) over what each mode's driver read from the live kernel
 * (ModeDriver.trace, as `drover trace` walks them); what a walk cannot
 * decide counts as a difference (never delete on doubt). Pure.
 */
import { trace, type Outcome, type Packet, type TraceContext } from '../inspect/trace.ts';
import { joinHostPort } from '../model/addr.ts';
import { familyView, IP_FAMILIES } from '../model/family.ts';
import { EVERY_NODE_PORT_ADDRESS, frontendEntries } from '../model/frontend-index.ts';
import type { IPFamily, Snapshot } from '../model/types.ts';

/** The source of every checked connection: a client outside the node and the cluster (RFC 5737, RFC 3849 documentation addresses). */
export const CHECK_SOURCE: Readonly<Record<IPFamily, string>> = { IPv4: '203.0.113.7', IPv6: '2001:db8::7' };

/** One frontend to check: the first packet of a new connection to it. */
export interface CheckedFrontend {
  /** e.g. "TCP 172.30.0.50:80 (ns/web:http ClusterIP)". */
  readonly label: string;
  readonly family: IPFamily;
  readonly packet: Packet;
}

/**
 * The frontends of `snapshot`, both families (model/frontend-index.ts
 * frontendEntries): ClusterIPs, external and LoadBalancer IPs, and each
 * NodePort at each of `nodeIPs` of its family, each as a connection from
 * {@link CHECK_SOURCE}.
 */
export function frontendsToCheck(snapshot: Snapshot, nodeIPs: Readonly<Record<IPFamily, readonly string[]>>): CheckedFrontend[] {
  const out: CheckedFrontend[] = [];
  for (const family of IP_FAMILIES) {
    for (const sp of familyView(snapshot, family).services.values()) {
      for (const e of frontendEntries(sp, family, snapshot.node)) {
        const addresses = e.address === EVERY_NODE_PORT_ADDRESS ? nodeIPs[family] : [e.address];
        for (const dst of addresses) {
          const packet: Packet = { src: CHECK_SOURCE[family], dst, dport: e.port, proto: e.protocol.toLowerCase() as Packet['proto'] };
          out.push({ label: `${e.protocol} ${joinHostPort(dst, e.port)} (${e.servicePort} ${e.kind})`, family, packet });
        }
      }
    }
  }
  return out;
}

/** What one outcome of a walk amounts to: the endpoint "ip:port" of a DNAT, or the verdict in capitals. */
function destination(o: Outcome): string {
  const v = o.verdict;
  switch (v.kind) {
    case 'dnat':
      return joinHostPort(v.ip, v.port);
    case 'unknown':
      return `CANNOT EVALUATE (${v.reason})`;
    case 'untouched':
      return 'NO DNAT';
    default:
      return v.kind.toUpperCase();
  }
}

/** The distinct destinations of a walk's outcomes of non-zero probability, sorted. */
export function destinationsOf(ctx: TraceContext, packet: Packet): string[] {
  const result = trace(ctx, packet);
  return [...new Set(result.outcomes.filter((o) => o.probability > 0).map(destination))].sort();
}

/** A frontend the two states send to different places. */
export interface FrontendDifference {
  readonly frontend: string;
  readonly old: readonly string[];
  readonly new: readonly string[];
}

/**
 * The frontends whose destinations differ between `old` and `current`
 * (trace contexts by family), or whose walk could not be decided in either.
 */
export function compareFrontends(
  frontends: readonly CheckedFrontend[],
  old: Readonly<Partial<Record<IPFamily, TraceContext>>>,
  current: Readonly<Partial<Record<IPFamily, TraceContext>>>,
): FrontendDifference[] {
  const diffs: FrontendDifference[] = [];
  for (const f of frontends) {
    const o = old[f.family];
    const c = current[f.family];
    const was = o === undefined ? ['NOT READ'] : destinationsOf(o, f.packet);
    const now = c === undefined ? ['NOT READ'] : destinationsOf(c, f.packet);
    const undecided = [...was, ...now].some((d) => d.startsWith('CANNOT EVALUATE') || d === 'NOT READ');
    if (undecided || was.join(' ') !== now.join(' ')) diffs.push({ frontend: f.label, old: was, new: now });
  }
  return diffs;
}

/**
 * The lines `takeover` prints when the check fails, one per frontend, the
 * states named by `oldTitle` and `newTitle` ("iptables mode"):
 * `  TCP 172.30.0.50:80 (ns/web:http ClusterIP): iptables mode 10.180.0.1:8080 10.180.0.2:8080, nftables mode 10.180.0.1:8080`.
 */
export function formatDifferences(oldTitle: string, newTitle: string, diffs: readonly FrontendDifference[]): string {
  return diffs.map((d) => `  ${d.frontend}: ${oldTitle} ${d.old.join(' ') || 'nothing'}, ${newTitle} ${d.new.join(' ') || 'nothing'}\n`).join('');
}
