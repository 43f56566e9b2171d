/**
 * The Shepherd source: a Shepherd API server → Snapshot
 * (`--source shepherd+http://HOST:PORT`, or `shepherd+https://`).
 *
 * Shepherd has no watch and no resourceVersion, so the source polls: every
 * poll interval (`--poll-interval`, default 5 s, the period of Shepherd's
 * own service controller) it lists every namespace's Services
 * (shepherd-api.ts), and asks for a sync only when the answer differs from
 * what it applied last: an object's JSON text changed, appeared or went
 * away, or a part of the server started or stopped failing. A poll that
 * changes nothing costs no sync.
 *
 * It is a transport over decoder.ts: each Service is one Decoder group,
 * keyed by its "Kind/namespace/name", and a load names only the groups whose
 * object changed (an object whose text is the same as at the last load is
 * neither parsed nor handed to the Decoder again), so one changed Service
 * costs about that Service, apart from a pass over every object's text and
 * the Snapshot rebuild (decoder.ts). The Service shape is the one drover
 * reads from Shepherd manifest files (model/shepherd.ts); a bad object's
 * errors name the URL of its service list, the object and the field.
 *
 * Nothing is deleted on an incomplete view (the proxier's rule, see
 * proxier.ts `SourceRead.incomplete`):
 *   - a server that is down, slow, refuses the token or answers something
 *     that is not a Shepherd namespace list: before the first read that
 *     succeeded, the load rejects (nothing is synced); after it, the load
 *     serves everything read last, marked incomplete;
 *   - a namespace whose service list fails: its Services are those read
 *     from it last, and the read is marked incomplete;
 *   - an invalid Service: it keeps its last valid version (or is skipped
 *     when it never had one), and the read is marked incomplete.
 * A namespace the server no longer lists, and a Service its namespace's
 * list no longer holds, are gone.
 */
import type { DroverError } from '../errors.ts';
import type { NodePortRange } from '../model/claims.ts';
import { ManifestError } from '../model/errors.ts';
import type { ParseResult } from '../model/parse.ts';
import type { ParsedObject } from '../model/parsed.ts';
import type { Allocation } from '../model/normalise.ts';
import type { Snapshot } from '../model/types.ts';
import type { Logger } from '../util/log.ts';
import { Decoder, type AllocationMemory } from './decoder.ts';
import { fileChanges } from './file.ts';
import { KEEP_NOTE } from './last-good.ts';
import { checkShepherdToken, readShepherd, ShepherdApiError, type NamespaceRead, type ShepherdRead } from './shepherd-api.ts';
import type { SourceLoad } from './source.ts';
import { DEFAULT_POLL_INTERVAL_MS } from './defaults.ts';

export { DEFAULT_POLL_INTERVAL_MS };

/** Default longest wait for one answer of the server, ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** Options of {@link ShepherdSource}. */
export interface ShepherdSourceOptions {
  /** Base URL (shepherd-api.ts shepherdBaseURL), e.g. "http://10.0.0.1:9876". */
  readonly baseURL: string;
  /** Service CIDR for ClusterIP allocation, e.g. "10.96.0.0/12". */
  readonly serviceCIDR: string;
  readonly logger: Logger;
  /** Bearer token (SHEPHERD_API_TOKEN); none: requests carry no Authorization header. */
  readonly token?: string | undefined;
  /** Time between two polls while watching, ms (default {@link DEFAULT_POLL_INTERVAL_MS}). */
  readonly pollIntervalMs?: number;
  /** Longest wait for one answer, ms (default {@link DEFAULT_REQUEST_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /** Where allocated ClusterIPs outlive the process (allocation-state.ts); none: in memory only. */
  readonly allocations?: AllocationMemory;
  /** NodePorts allowed (`--service-node-port-range`); default model/claims.ts DEFAULT_NODE_PORT_RANGE, 30000-32767. */
  readonly nodePortRange?: NodePortRange | undefined;
}

/** What one namespace served at the last load. */
interface NamespaceState {
  /** The JSON text of each object of its list → its parse result. */
  readonly parsed: ReadonlyMap<string, ParseResult>;
  /** Identity → the objects served for it (the object itself, or its last valid version). */
  readonly groups: ReadonlyMap<string, readonly ParsedObject[]>;
  /** Object errors (skipped, or kept at their last valid version) and warnings of its last successful read. */
  readonly errors: readonly ManifestError[];
  readonly warnings: readonly ManifestError[];
  /** Why its last read failed; undefined when it succeeded. */
  readonly failure: ShepherdApiError | undefined;
}

/** One poll and its place in the order polls were started. */
interface Poll {
  readonly seq: number;
  readonly read: ShepherdRead;
}

/** Polls a Shepherd API server; see the module comment. */
export class ShepherdSource {
  private readonly opts: ShepherdSourceOptions;
  private readonly pollIntervalMs: number;
  private readonly decoder: Decoder;
  private namespaces = new Map<string, NamespaceState>();
  /** True once a namespace list was read. */
  private everRead = false;
  /** The message of the namespace list's failure at the last load; undefined when it was read. */
  private listFailure: string | undefined;
  private allocations: Allocation[] = [];
  /** The frontends refused at the last read that decoded (model/claims.ts), kept while the server cannot be read. */
  private refusals: readonly ManifestError[] = [];
  /** "namespace/name" → ClusterIP already announced in the log. */
  private announced = new Map<string, string>();
  private seq = 0;
  /** The `seq` of the poll the last load applied. */
  private appliedSeq = 0;
  /** A poll of the watcher that differs from what was applied, for the next load. */
  private pending: Poll | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private onChange: (() => void) | undefined;
  /** One per poll in flight, aborted by {@link close}. */
  private readonly inflight = new Set<AbortController>();

  /**
   * Throws Error when `opts.serviceCIDR` is not a valid service CIDR
   * (allocate.ts parseServiceCIDR), DroverError when `opts.token` cannot be
   * sent in a header (shepherd-api.ts checkShepherdToken).
   */
  constructor(opts: ShepherdSourceOptions) {
    if (opts.token !== undefined) checkShepherdToken(opts.token);
    this.opts = opts;
    this.pollIntervalMs = opts.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.decoder = new Decoder({
      serviceCIDR: opts.serviceCIDR,
      ...(opts.allocations ? { allocations: opts.allocations } : {}),
      ...(opts.nodePortRange !== undefined ? { nodePortRange: opts.nodePortRange } : {}),
    });
  }

  /**
   * Read the server (or take the watcher's latest poll when it is newer than
   * what was applied) and build a Snapshot. Calls are serialised. Rejects
   * with {@link ShepherdApiError} when the namespace list cannot be read and
   * never could be; see the module comment for every other failure.
   */
  load(): Promise<SourceLoad> {
    const run = this.queue.then(() => this.loadNow());
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async loadNow(): Promise<SourceLoad> {
    const pending = this.pending;
    this.pending = undefined;
    const poll = pending !== undefined && pending.seq > this.appliedSeq ? pending : await this.poll();
    if (poll.read.error !== undefined && !this.everRead) {
      this.logFailure(poll.read.error.message);
      throw poll.read.error;
    }
    this.appliedSeq = Math.max(this.appliedSeq, poll.seq);
    const errors: DroverError[] = [];
    const warnings: ManifestError[] = [];
    let result: { snapshot: Snapshot; changed: ReadonlySet<string> | undefined } = { snapshot: this.decoder.current, changed: new Set() };
    let refusals: readonly ManifestError[] = this.refusals;
    if (poll.read.error !== undefined) {
      // Nothing could be read: serve everything read last.
      this.logFailure(poll.read.error.message);
    } else {
      if (this.listFailure !== undefined || !this.everRead) this.opts.logger.info({ source: this.opts.baseURL }, `read the Shepherd API server at ${this.opts.baseURL}`);
      this.everRead = true;
      this.listFailure = undefined;
      const before = this.served();
      this.namespaces = this.next(poll.read.namespaces);
      const built = this.decoder.apply(fileChanges(before, this.served()));
      errors.push(...built.errors);
      warnings.push(...built.warnings);
      refusals = this.refusals = built.refusals;
      for (const e of built.newRefusals) this.opts.logger.warn({ origin: e.origin, field: e.field }, e.message);
      this.allocations = built.allocations;
      result = built;
    }
    for (const ns of this.namespaces.values()) {
      if (ns.failure !== undefined) errors.push(ns.failure.withNote('keeping the Services last read from it'));
      errors.push(...ns.errors);
      warnings.push(...ns.warnings);
    }
    this.log([...errors, ...warnings]);
    if (poll.read.error !== undefined) errors.unshift(poll.read.error.withNote('keeping the Services last read'));
    // A whole read: the records of the state file for Services not in it are of Services gone.
    if (errors.length === 0) this.decoder.forgetAbsent();
    return { snapshot: result.snapshot, errors, warnings, refusals, incomplete: errors.map((e) => e.message), changed: result.changed };
  }

  /** Every Decoder group of the current state: identity → objects. */
  private served(): Map<string, readonly ParsedObject[]> {
    const out = new Map<string, readonly ParsedObject[]>();
    for (const ns of this.namespaces.values()) {
      for (const [identity, objects] of ns.groups) {
        const other = out.get(identity);
        out.set(identity, other === undefined ? objects : [...other, ...objects]);
      }
    }
    return out;
  }

  /** The state after `reads`: a failed namespace keeps what it had; objects whose text is unchanged keep their parse result. */
  private next(reads: ReadonlyMap<string, NamespaceRead>): Map<string, NamespaceState> {
    const out = new Map<string, NamespaceState>();
    for (const [name, read] of reads) {
      const old = this.namespaces.get(name);
      if (read.error !== undefined) {
        out.set(name, { parsed: old?.parsed ?? new Map(), groups: old?.groups ?? new Map(), errors: old?.errors ?? [], warnings: old?.warnings ?? [], failure: read.error });
        continue;
      }
      out.set(name, this.readNamespace(read.url, read.items, old));
    }
    return out;
  }

  /** Parse one namespace's list (see the module comment for invalid objects). */
  private readNamespace(url: string, items: readonly unknown[], old: NamespaceState | undefined): NamespaceState {
    const parsed = new Map<string, ParseResult>();
    const groups = new Map<string, ParsedObject[]>();
    const failed: Array<{ identity: string | undefined; error: ManifestError }> = [];
    const warnings: ManifestError[] = [];
    items.forEach((raw, index) => {
      const text = JSON.stringify(raw) ?? 'undefined';
      let r = parsed.get(text) ?? old?.parsed.get(text);
      if (r === undefined) r = this.decoder.parse({ file: url, index, raw });
      parsed.set(text, r);
      if (r.status === 'ok') {
        warnings.push(...r.warnings);
        const list = groups.get(r.object.identity);
        if (list) list.push(r.object);
        else groups.set(r.object.identity, [r.object]);
      } else if (r.status === 'error') {
        failed.push({ identity: r.identity, error: r.error });
      } else {
        this.opts.logger.debug({ url, index, reason: r.reason }, `ignored object #${index + 1} of ${url}: ${r.reason}`);
      }
    });
    // An invalid object keeps its last valid version, unless its identity is valid in this read.
    const errors: ManifestError[] = [];
    for (const { identity, error } of failed) {
      const last = identity === undefined || groups.has(identity) ? undefined : old?.groups.get(identity);
      if (last !== undefined) {
        groups.set(identity!, [...last]);
        errors.push(error.withNote(KEEP_NOTE));
      } else errors.push(error);
    }
    return { parsed, groups, errors, warnings, failure: undefined };
  }

  /** Run one poll, numbered in the order polls start. Never throws. */
  private async poll(): Promise<Poll> {
    const seq = ++this.seq;
    const abort = new AbortController();
    this.inflight.add(abort);
    try {
      const read = await readShepherd({
        baseURL: this.opts.baseURL,
        token: this.opts.token,
        timeoutMs: this.opts.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
        signal: abort.signal,
      });
      return { seq, read };
    } finally {
      this.inflight.delete(abort);
    }
  }

  /** Whether `read` differs from what the last load applied: an object's text, a namespace, or a failure. */
  private differs(read: ShepherdRead): boolean {
    if (read.error !== undefined) return !this.everRead || this.listFailure !== read.error.message;
    if (this.listFailure !== undefined || !this.everRead || read.namespaces.size !== this.namespaces.size) return true;
    for (const [name, ns] of read.namespaces) {
      const old = this.namespaces.get(name);
      if (old === undefined || old.failure?.message !== ns.error?.message) return true;
      if (ns.error !== undefined) continue;
      if (ns.items.length !== old.parsed.size || ns.items.some((raw) => !old.parsed.has(JSON.stringify(raw) ?? 'undefined'))) return true;
    }
    return false;
  }

  /**
   * Poll every poll interval and call `onChange` after a poll that differs
   * from what was applied (the next {@link load} then uses that poll).
   * Calling it twice replaces the previous callback.
   */
  watch(onChange: () => void): void {
    this.onChange = onChange;
    if (this.timer === undefined) this.schedule();
  }

  private schedule(): void {
    this.timer = setTimeout(() => void this.tick(), this.pollIntervalMs);
  }

  private async tick(): Promise<void> {
    const poll = await this.poll();
    await this.queue; // compare with what a load in flight applies
    if (this.onChange === undefined) return; // closed meanwhile
    if (poll.seq > this.appliedSeq && this.differs(poll.read)) {
      // A sync was asked for already when a poll is pending: the next load takes the newer one.
      const asked = this.pending !== undefined;
      this.pending = poll;
      if (!asked) this.onChange();
    }
    this.schedule();
  }

  /** Stop polling and abort requests in flight. Safe to call more than once. */
  close(): void {
    this.onChange = undefined;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const abort of this.inflight) abort.abort();
  }

  /** Log a failure of the namespace list when it is new (not at every load while it lasts). */
  private logFailure(message: string): void {
    if (this.listFailure !== message) {
      this.opts.logger.warn({ source: this.opts.baseURL }, `cannot read the Shepherd API server: ${message}; ${this.everRead ? 'keeping the Services last read' : 'nothing is synced until it answers'}`);
    }
    this.listFailure = message;
  }

  /** Log every problem of a load at warn, and each newly allocated ClusterIP at info. */
  private log(problems: readonly DroverError[]): void {
    for (const e of problems) this.opts.logger.warn({ origin: e.origin, field: e.field }, e.message);
    const current = new Map(this.allocations.map((a) => [a.key, a.clusterIP]));
    for (const [key, ip] of current) {
      if (this.announced.get(key) !== ip) this.opts.logger.info({ service: key, clusterIP: ip }, `allocated ClusterIP ${ip} to ${key}`);
    }
    this.announced = current;
  }
}

