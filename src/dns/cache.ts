/**
 * A bounded cache of upstream answers, keyed by question: at most `maxEntries`
 * entries, the least recently used dropped first, each kept for its own
 * lifetime. The lifetimes follow NodeLocal DNSCache's CoreDNS `cache`
 * settings: a success at most 30 s (and never longer than its smallest
 * record TTL, RFC 1035 §3.2.1), a denial (NXDOMAIN, NODATA) at most 5 s
 * (and never longer than its SOA's negative TTL, RFC 2308 §5).
 */
import type { Answer, Packet } from 'dns-packet';

/** Cache limits: seconds and entries. */
export interface CacheLimits {
  /** Longest life of a success, seconds (default 30). */
  readonly successTtl: number;
  /** Longest life of a denial, seconds (default 5). */
  readonly denialTtl: number;
  /** Most entries held (default 10,000). */
  readonly maxEntries: number;
}

/** NodeLocal DNSCache's limits (`cache 30` success, `denial 9984 5`), and 10,000 entries. */
export const DEFAULT_CACHE_LIMITS: CacheLimits = { successTtl: 30, denialTtl: 5, maxEntries: 10_000 };

/** One cached answer: the upstream's packet, and until when it may be served (ms, the clock's). */
interface Entry {
  readonly packet: Packet;
  readonly until: number;
  readonly storedAt: number;
}

/** The rcode of a decoded packet (dns-packet puts it in `rcode`, absent from its types). */
export function rcodeOf(packet: Packet): string {
  return (packet as { rcode?: string }).rcode ?? 'NOERROR';
}

/** How long `packet` may be cached, seconds; 0 when it may not (an error other than NXDOMAIN, or a truncated answer). */
export function cacheSeconds(packet: Packet, limits: CacheLimits): number {
  const rcode = rcodeOf(packet);
  const ttls = [...(packet.answers ?? []), ...(packet.authorities ?? [])].map((r) => (r.type === 'OPT' ? Infinity : (r.ttl ?? 0)));
  const soa = (packet.authorities ?? []).find((r) => r.type === 'SOA') as { ttl?: number; data: { minimum: number } } | undefined;
  const denial = rcode === 'NXDOMAIN' || (rcode === 'NOERROR' && (packet.answers ?? []).length === 0);
  if ((rcode !== 'NOERROR' && rcode !== 'NXDOMAIN') || ((packet.flags ?? 0) & 0x200) !== 0) return 0;
  if (denial) {
    const negative = soa !== undefined ? Math.min(soa.ttl ?? 0, soa.data.minimum) : limits.denialTtl;
    return Math.max(0, Math.min(limits.denialTtl, negative));
  }
  return Math.max(0, Math.min(limits.successTtl, ...ttls));
}

/** See the module comment. `now` gives ms (tests pass a fake clock). */
export class AnswerCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly limits: CacheLimits = DEFAULT_CACHE_LIMITS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Entries held, expired ones included until they are looked up or pushed out. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The packet cached under `key` with its records' TTLs lowered by the
   * time it has been held (RFC 1035 §4.1.3), or undefined.
   */
  get(key: string): Packet | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    const now = this.now();
    if (now >= entry.until) {
      this.entries.delete(key);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, entry);
    const aged = Math.floor((now - entry.storedAt) / 1000);
    const age = (list: Answer[] | undefined) => list?.map((r) => (r.type === 'OPT' ? r : ({ ...r, ttl: Math.max(0, (r.ttl ?? 0) - aged) } as Answer)));
    return { ...entry.packet, answers: age(entry.packet.answers), authorities: age(entry.packet.authorities), additionals: age(entry.packet.additionals) };
  }

  /** Cache `packet` under `key` for {@link cacheSeconds}; nothing when that is 0. */
  put(key: string, packet: Packet): void {
    const seconds = cacheSeconds(packet, this.limits);
    if (seconds <= 0) return;
    this.entries.delete(key);
    const now = this.now();
    this.entries.set(key, { packet, until: now + seconds * 1000, storedAt: now });
    while (this.entries.size > this.limits.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }
}
