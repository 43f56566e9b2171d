/**
 * The server's cache of encoded cluster-zone answers: the bytes dns-packet
 * encoded for one answer, kept so that the same question is answered again
 * with a copy and a new ID instead of a zone lookup and an encoding.
 *
 * A key holds everything the answer's bytes depend on besides the ID and
 * the transport's size limit (see {@link zoneAnswerKey}); an entry holds
 * the answer whole and, when it is longer than the smallest limit (512
 * bytes), its truncated form, so the limit is applied when the entry is
 * used. The cache is emptied whenever the zone's generation differs from
 * the one its entries were made at ({@link Zone.generation}), so an answer
 * is never served from a zone that has since changed.
 *
 * Bounded: at most `maxEntries` entries and `maxBytes` bytes (answers and
 * keys counted); past either, the oldest entries are dropped first.
 */
import type { Question } from 'dns-packet';

/** One encoded answer. */
export interface CachedAnswer {
  /** The rcode's name, for the counters. */
  readonly rcode: string;
  /** The answer as encoded, ID 0. */
  readonly whole: Buffer;
  /** The same answer with TC set and no records, ID 0, when `whole` is longer than 512 bytes (RFC 1035 §4.2.1). */
  readonly truncated: Buffer | undefined;
}

/** The cache's bounds. */
export interface ZoneAnswerCacheLimits {
  /** Most entries (default 10,000). */
  readonly maxEntries: number;
  /** Most bytes of answers and keys (default 8 MiB). */
  readonly maxBytes: number;
}

/** 10,000 entries, 8 MiB. */
export const DEFAULT_ZONE_ANSWER_CACHE_LIMITS: ZoneAnswerCacheLimits = { maxEntries: 10_000, maxBytes: 8 << 20 };

/**
 * The key of the answer to `question` (as dns-packet decoded it: the name
 * as the client wrote it, case included, since the answer echoes it), with
 * recursion desired or not (echoed in the flags) and with or without the
 * client's EDNS OPT record (answered with drover's OPT).
 */
export function zoneAnswerKey(question: Question, recursionDesired: boolean, edns: boolean): string {
  return `${recursionDesired ? 1 : 0}${edns ? 1 : 0}${question.type} ${question.class ?? 'IN'} ${question.name}`;
}

/** The bytes an entry holds: its answers, and its key (two bytes a character). */
function sizeOf(key: string, entry: CachedAnswer): number {
  return key.length * 2 + entry.whole.length + (entry.truncated?.length ?? 0);
}

/** See the module comment. */
export class ZoneAnswerCache {
  private readonly entries = new Map<string, CachedAnswer>();
  private bytes = 0;
  private generation = -1;

  constructor(private readonly limits: ZoneAnswerCacheLimits = DEFAULT_ZONE_ANSWER_CACHE_LIMITS) {}

  /** How many entries are held. */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes held (answers and keys). */
  get heldBytes(): number {
    return this.bytes;
  }

  /** The answer under `key` made at the zone's `generation`, or undefined. */
  get(key: string, generation: number): CachedAnswer | undefined {
    if (generation !== this.generation) this.reset(generation);
    return this.entries.get(key);
  }

  /** Keep `entry` under `key`, made at the zone's `generation`; an entry larger than the byte bound is not kept. */
  set(key: string, generation: number, entry: CachedAnswer): void {
    if (generation !== this.generation) this.reset(generation);
    const size = sizeOf(key, entry);
    if (size > this.limits.maxBytes || this.limits.maxEntries <= 0) return;
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.bytes -= sizeOf(key, old);
    }
    while (this.entries.size >= this.limits.maxEntries || this.bytes + size > this.limits.maxBytes) {
      const [oldestKey, oldest] = this.entries.entries().next().value!;
      this.entries.delete(oldestKey);
      this.bytes -= sizeOf(oldestKey, oldest);
    }
    this.entries.set(key, entry);
    this.bytes += size;
  }

  /** Drop every entry; the next ones are made at `generation`. */
  private reset(generation: number): void {
    this.entries.clear();
    this.bytes = 0;
    this.generation = generation;
  }
}
