/**
 * The cluster zone: the records of every Service, kept per owner (one
 * service port of one family, or one DNS-only Service) so that a change
 * replaces one owner's records and costs O(that owner), and the answer to
 * one question from them.
 *
 * Answers follow RFC 1034 §4.3.2 and the Kubernetes DNS specification
 * (schema 1.1.0): names compare case-insensitively (RFC 4343); a name that
 * holds records but none of the asked type, or that only has names below it
 * (an empty non-terminal such as `<ns>.svc.<zone>`, RFC 8020), is NODATA;
 * any other name in the zone is NXDOMAIN; both carry the zone's SOA in the
 * authority section, whose TTL is the negative-caching TTL (RFC 2308 §3,
 * §5). `dns-version.<zone>` is `TXT "1.1.0"` (specification §2.2). A CNAME
 * answers every type but CNAME itself, followed inside the zone
 * (RFC 1034 §3.6.2). Reverse names (`in-addr.arpa`, `ip6.arpa`) are answered
 * when the zone holds a PTR for them; anything else outside the zone is not
 * the zone's (the server forwards it).
 */
import type { RecordType } from 'dns-packet';
import type { ZoneRecord } from './records.ts';

/** The schema version of the Kubernetes DNS specification these records follow (§2.2). */
export const DNS_SCHEMA_VERSION = '1.1.0';

/** The zone's answer to one question. */
export interface ZoneAnswer {
  readonly rcode: 'NOERROR' | 'NXDOMAIN';
  /** The answer section, with TTL and class set. */
  readonly answers: readonly ZoneRecord[];
  /** The authority section: the zone's SOA on NXDOMAIN and NODATA, else empty. */
  readonly authorities: readonly ZoneRecord[];
}

/** What {@link Zone.answer} takes a question's type as: dns-packet's name, or `UNKNOWN_<n>` for a type it does not know. */
export type QuestionType = RecordType | 'ANY' | `UNKNOWN_${number}`;

/** The zone's settings. */
export interface ZoneOptions {
  /** The cluster domain, e.g. "cluster.local" (`--cluster-domain`); any case, with or without the trailing dot. */
  readonly domain: string;
  /** TTL of every record, and of the SOA's negative caching, seconds (`--dns-ttl`, default 5 as CoreDNS's kubernetes plugin). */
  readonly ttl: number;
}

/** Lower case, no trailing dot. */
function canonical(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** A record's identity within its name, for de-duplication across owners. */
function recordKey(r: ZoneRecord): string {
  return `${r.type} ${JSON.stringify(r.data)}`;
}

/** The owner used for the zone's own records (`dns-version`). */
const SELF = '\0zone';

/** See the module comment. */
export class Zone {
  /** The zone's origin, canonical. */
  readonly domain: string;
  readonly ttl: number;
  /** Name → owner → that owner's records at that name. */
  private readonly names = new Map<string, Map<string, ZoneRecord[]>>();
  /** Owner → the names it holds records at. */
  private readonly owners = new Map<string, readonly string[]>();
  /** Name strictly above a record name inside the zone → how many record names are below it (RFC 8020 empty non-terminals). */
  private readonly above = new Map<string, number>();
  /** See {@link Zone.generation}. */
  private changes = 0;

  /** @throws RangeError when the TTL is not an integer of 0-2147483647 s (RFC 2181 §8) or the domain is not a domain name. */
  constructor(opts: ZoneOptions) {
    if (!Number.isInteger(opts.ttl) || opts.ttl < 0 || opts.ttl > 2147483647) throw new RangeError(`DNS TTL ${opts.ttl}: not an integer of 0-2147483647 seconds`);
    this.domain = canonical(opts.domain);
    if (!/^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(this.domain) || this.domain.length > 253) {
      throw new RangeError(`cluster domain ${JSON.stringify(opts.domain)}: not a domain name of DNS-1123 labels`);
    }
    this.ttl = opts.ttl;
    this.set(SELF, [{ name: `dns-version.${this.domain}`, type: 'TXT', data: DNS_SCHEMA_VERSION }]);
  }

  /**
   * A number that changes whenever the zone's records may have (every
   * {@link Zone.set}, and every {@link Zone.delete} that removed records):
   * an answer computed at one generation is the answer as long as the
   * generation is the same (the server's cache of encoded answers,
   * zone-answer-cache.ts).
   */
  get generation(): number {
    return this.changes;
  }

  /** How many owners hold records (the zone's own `dns-version` not counted). */
  get size(): number {
    return this.owners.size - 1;
  }

  /**
   * Replace the records of `owner` (a service port key with its family, or a
   * DNS-only Service) by `records` (record names lower-case, without the
   * trailing dot, as records.ts gives them). Empty: the owner goes.
   * O(records of the owner before and after).
   */
  set(owner: string, records: readonly ZoneRecord[]): void {
    this.changes++;
    this.delete(owner);
    if (records.length === 0) return;
    const byName = new Map<string, ZoneRecord[]>();
    for (const r of records) {
      const name = canonical(r.name);
      const list = byName.get(name) ?? [];
      list.push({ ...r, name } as ZoneRecord);
      byName.set(name, list);
    }
    for (const [name, list] of byName) {
      let at = this.names.get(name);
      if (at === undefined) {
        at = new Map();
        this.names.set(name, at);
        this.countAbove(name, 1);
      }
      at.set(owner, list);
    }
    this.owners.set(owner, [...byName.keys()]);
  }

  /** Remove the records of `owner`; nothing when it has none. */
  delete(owner: string): void {
    const held = this.owners.get(owner);
    if (held === undefined) return;
    this.changes++;
    this.owners.delete(owner);
    for (const name of held) {
      const at = this.names.get(name)!;
      at.delete(owner);
      if (at.size === 0) {
        this.names.delete(name);
        this.countAbove(name, -1);
      }
    }
  }

  /** Whether `owner` holds records. */
  has(owner: string): boolean {
    return this.owners.has(owner);
  }

  /** Every owner that holds records (the zone's own excluded). */
  *ownerKeys(): IterableIterator<string> {
    for (const owner of this.owners.keys()) if (owner !== SELF) yield owner;
  }

  /**
   * The answer to the question `qname`/`qtype` (class IN), or undefined
   * when the name is not the zone's to answer (outside the zone, and not a
   * reverse name the zone holds a PTR for). Answer records carry `qname` as
   * asked, so a client's 0x20 case survives.
   */
  answer(qname: string, qtype: QuestionType): ZoneAnswer | undefined {
    const name = canonical(qname);
    const inZone = name === this.domain || name.endsWith(`.${this.domain}`);
    if (!inZone) {
      const records = this.recordsAt(name);
      if (records.length === 0 || !(name.endsWith('.in-addr.arpa') || name.endsWith('.ip6.arpa'))) return undefined;
      return this.found(qname, records, qtype) ?? this.denial('NOERROR');
    }
    if (name === this.domain) {
      if (qtype === 'SOA' || qtype === 'ANY') return { rcode: 'NOERROR', answers: [this.soa(qname)], authorities: [] };
      return this.denial('NOERROR');
    }
    const records = this.recordsAt(name);
    if (records.length > 0) {
      const cname = records.find((r) => r.type === 'CNAME');
      if (cname !== undefined && qtype !== 'CNAME' && qtype !== 'ANY') {
        const first = this.withTtl(qname, cname);
        const target = canonical(String(cname.data));
        const chased = target === this.domain || target.endsWith(`.${this.domain}`) ? this.answer(target, qtype) : undefined;
        if (chased === undefined) return { rcode: 'NOERROR', answers: [first], authorities: [] };
        return { rcode: chased.rcode, answers: [first, ...chased.answers], authorities: chased.authorities };
      }
      return this.found(qname, records, qtype) ?? this.denial('NOERROR');
    }
    return this.denial(this.above.has(name) ? 'NOERROR' : 'NXDOMAIN');
  }

  /** The records at `name` (canonical) of every owner, de-duplicated, in owner order. */
  private recordsAt(name: string): ZoneRecord[] {
    const at = this.names.get(name);
    if (at === undefined) return [];
    if (at.size === 1) return at.values().next().value!;
    const seen = new Map<string, ZoneRecord>();
    for (const list of at.values()) for (const r of list) if (!seen.has(recordKey(r))) seen.set(recordKey(r), r);
    return [...seen.values()];
  }

  /** The records of `qtype` (all for ANY) as an answer, or undefined when there are none (NODATA). */
  private found(qname: string, records: readonly ZoneRecord[], qtype: QuestionType): ZoneAnswer | undefined {
    const matched = qtype === 'ANY' ? records : records.filter((r) => r.type === qtype);
    if (matched.length === 0) return undefined;
    return { rcode: 'NOERROR', answers: matched.map((r) => this.withTtl(qname, r)), authorities: [] };
  }

  private withTtl(qname: string, r: ZoneRecord): ZoneRecord {
    return { ...r, name: qname.endsWith('.') ? qname.slice(0, -1) : qname, ttl: this.ttl, class: 'IN' } as ZoneRecord;
  }

  /** NXDOMAIN, or NODATA (NOERROR without answers), with the SOA (RFC 2308 §2.1, §2.2). */
  private denial(rcode: ZoneAnswer['rcode']): ZoneAnswer {
    return { rcode, answers: [], authorities: [this.soa(this.domain)] };
  }

  /**
   * The zone's SOA (CoreDNS's kubernetes plugin's shape): primary
   * `ns.dns.<zone>`, contact `hostmaster.<zone>`, serial 1, refresh 7200,
   * retry 1800, expire 86400, minimum and TTL the zone TTL (RFC 2308 §5: the
   * negative TTL is the smaller of the two).
   */
  private soa(name: string): ZoneRecord {
    return {
      name: name.endsWith('.') ? name.slice(0, -1) : name,
      type: 'SOA',
      class: 'IN',
      ttl: this.ttl,
      data: { mname: `ns.dns.${this.domain}`, rname: `hostmaster.${this.domain}`, serial: 1, refresh: 7200, retry: 1800, expire: 86400, minimum: this.ttl },
    };
  }

  /** Count `name` (canonical) in or out of the empty non-terminals above it, up to the zone's origin. */
  private countAbove(name: string, delta: 1 | -1): void {
    if (!(name.endsWith(`.${this.domain}`))) return;
    let at = name;
    for (;;) {
      at = at.slice(at.indexOf('.') + 1);
      if (at === this.domain) return;
      const n = (this.above.get(at) ?? 0) + delta;
      if (n === 0) this.above.delete(at);
      else this.above.set(at, n);
    }
  }
}
