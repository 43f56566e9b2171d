/**
 * A mode's Backend for both IP families, as kube-proxy's metaproxier runs
 * an IPv4 and an IPv6 proxier side by side (pkg/proxy/metaproxier): one
 * Backend per family, each fed its family's view of the snapshot
 * (model/family.ts). iptables mode (iptables-restore and ip6tables-restore)
 * and nftables mode (`table ip drover` and `table ip6 drover`) use it.
 *
 * A failure in one family never stops the other (kube-proxy issue 73157):
 * both are synced, and the sync throws afterwards (naming the family) so
 * that the proxier retries with a full sync; the family that failed has
 * forgotten what it programmed, the other is only read back again. When
 * every failure is a read-back past its bound (read-back.ts), the first of
 * them is thrown as it is, so that the proxier puts the full sync off.
 *
 * The IPv6 family is dormant while there is nothing for it to do: until
 * the snapshot has an IPv6 service port, or a full sync finds drover's
 * state in the kernel's IPv6 side (left by an earlier run, to be repaired
 * or removed), nothing is read or written for IPv6, so a node without
 * IPv6 Services runs exactly as before. Once awake it stays awake for the
 * life of the process, as the IPv4 family does; while its view is empty,
 * a failure of the IPv6 family (say, a kernel without IPv6) is logged,
 * not thrown.
 */
import { DroverError } from '../../errors.ts';
import { ReadBackTimeoutError } from '../../errors.ts';
import { allPortKeys, familyView } from '../../model/family.ts';
import type { IPFamily, Snapshot } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import type { Backend, ChangeSet, CleanupResult, ModeSyncDetail, ObjectCounts, ProxyMode, SyncResult } from '../../proxier/backend.ts';
export { resultsByFamily } from '../../proxier/backend.ts';

/** A sync failure of one family, named. */
export class FamilySyncError extends DroverError {
  constructor(
    readonly failures: ReadonlyArray<{ readonly family: IPFamily; readonly error: unknown }>,
  ) {
    super(failures.map((f) => `${f.family}: ${(f.error as Error)?.message ?? String(f.error)}`).join('; '));
    this.name = 'FamilySyncError';
  }
}

/**
 * The IP families a failed sync failed in, each with its error: a
 * {@link FamilySyncError}'s, else the error as the IPv4 family's (a
 * dual-stack backend throws a family's own error unchanged only when the
 * IPv4 family failed and the IPv6 one did not run or had nothing to do).
 */
export function failuresByFamily(cause: unknown): ReadonlyArray<{ readonly family: IPFamily; readonly error: unknown }> {
  return cause instanceof FamilySyncError ? cause.failures : [{ family: 'IPv4', error: cause }];
}

/** Options of {@link DualStackBackend}. */
export interface DualStackBackendOptions {
  readonly mode: ProxyMode;
  /** Each family's backend, each synced with its family's view. */
  readonly backends: Readonly<Record<IPFamily, Backend>>;
  readonly logger: Logger;
  /**
   * True when the kernel's IPv6 side holds state of drover's (chains,
   * table); false also when it cannot be read. Asked once, at the first
   * sync while the IPv6 family is dormant, and when its cleanup fails.
   */
  readonly ipv6HasState: () => Promise<boolean>;
  /** Both families' details of a sync as one (IPv4's first). */
  readonly mergeDetail: (a: ModeSyncDetail | undefined, b: ModeSyncDetail | undefined) => ModeSyncDetail | undefined;
  /**
   * Called once both families ran, with the families whose sync succeeded
   * (nftables mode reads the ruleset's generation id again there: both
   * families' writes move it).
   */
  readonly afterSync?: (synced: readonly IPFamily[]) => Promise<void>;
}

/** A mode's Backend for both families (see the module comment). */
export class DualStackBackend implements Backend {
  readonly mode: ProxyMode;
  /** Whether the IPv6 family has woken up (see the module comment). */
  private ipv6Awake = false;
  /** Whether the kernel's IPv6 side was looked at for drover's state since the start. */
  private ipv6Probed = false;

  constructor(private readonly dual: DualStackBackendOptions) {
    this.mode = dual.mode;
  }

  /** Sync the IPv4 family, then the IPv6 one when awake; a failure of either is thrown after both ran. */
  async sync(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult> {
    const v6 = familyView(snapshot, 'IPv6');
    if (!this.ipv6Awake && v6.services.size > 0) this.ipv6Awake = true;
    if (!this.ipv6Awake && !this.ipv6Probed) {
      this.ipv6Probed = true;
      this.ipv6Awake = await this.probeIPv6();
    }
    const failures: Array<{ family: IPFamily; error: unknown }> = [];
    const results: SyncResult[] = [];
    const synced: IPFamily[] = [];
    try {
      results.push(await this.dual.backends.IPv4.sync(familyView(snapshot, 'IPv4'), changes));
      synced.push('IPv4');
    } catch (error) {
      failures.push({ family: 'IPv4', error });
    }
    if (this.ipv6Awake) {
      try {
        results.push(await this.dual.backends.IPv6.sync(v6, changes));
        synced.push('IPv6');
      } catch (error) {
        if (v6.services.size > 0) failures.push({ family: 'IPv6', error });
        else this.dual.logger.warn({ err: (error as Error).message }, 'IPv6 sync failed; no Service has an IPv6 ClusterIP, so the IPv4 sync stands');
      }
    }
    if (synced.length > 0 && this.dual.afterSync) await this.dual.afterSync(synced);
    if (failures.length > 0) {
      // A read-back past its bound is no failure (read-back.ts): the proxier logs it once.
      for (const f of failures.filter((f) => !(f.error instanceof ReadBackTimeoutError))) {
        this.dual.logger.error({ family: f.family, err: (f.error as Error)?.message }, 'sync of one IP family failed; the other family was synced');
      }
      // Only read-backs past their bound: those families wrote nothing and keep what they know, so the whole sync can be put off.
      if (failures.every((f) => f.error instanceof ReadBackTimeoutError)) throw failures[0]!.error;
      throw failures.length === 1 && results.length === 0 ? failures[0]!.error : new FamilySyncError(failures);
    }
    const families: Partial<Record<IPFamily, SyncResult>> = {};
    synced.forEach((family, i) => (families[family] = results[i]!));
    return { ...mergeResults(results, snapshot, this.dual.mergeDetail), families };
  }

  /** {@link DualStackBackendOptions.ipv6HasState}, false when it throws. */
  private async probeIPv6(): Promise<boolean> {
    try {
      return await this.dual.ipv6HasState();
    } catch {
      return false;
    }
  }

  /** The drift check of each awake family; the first reason found. */
  async driftCheck(): Promise<string | undefined> {
    const check = (b: Backend) => (b.driftCheck ? b.driftCheck() : Promise.resolve('no drift check'));
    const v4 = await check(this.dual.backends.IPv4);
    if (v4 !== undefined || !this.ipv6Awake) return v4;
    const v6 = await check(this.dual.backends.IPv6);
    return v6 === undefined ? undefined : `IPv6: ${v6}`;
  }

  /**
   * Clean up both families (IPv6 only when it can be read); counts summed,
   * kept chains of both (IPv6 ones' tables named "… (IPv6)"). A failure of
   * the IPv4 side does not keep the IPv6 side from being cleaned: its
   * error is thrown after that. An IPv6 failure is thrown when the IPv6
   * side had state before its cleanup (probed first, since a cleanup that
   * fails part-way may already have removed what the probe looks for).
   */
  async cleanup(): Promise<CleanupResult> {
    let v4: CleanupResult | undefined;
    let v4Error: unknown;
    try {
      v4 = await this.dual.backends.IPv4.cleanup();
    } catch (err) {
      v4Error = err;
    }
    let v6: CleanupResult | undefined;
    // Probed before the cleanup, which may remove what the probe looks for
    // even when one of its steps fails.
    const ipv6HadState = await this.probeIPv6();
    try {
      v6 = await this.dual.backends.IPv6.cleanup();
    } catch (err) {
      if (ipv6HadState) throw v4Error ?? err;
      this.dual.logger.debug({ err: (err as Error).message }, 'IPv6 side not cleaned: it cannot be read');
    }
    if (v4 === undefined) throw v4Error;
    if (v6 === undefined) return v4;
    return { removed: sumCounts(v4.removed, v6.removed), kept: [...v4.kept, ...v6.kept.map((k) => ({ ...k, table: `${k.table} (IPv6)` }))] };
  }

  /** Close both families' backends. */
  async close(): Promise<void> {
    await this.dual.backends.IPv4.close?.();
    await this.dual.backends.IPv6.close?.();
  }
}

/** Counts by kind, added. */
export function sumCounts(a: ObjectCounts, b: ObjectCounts): ObjectCounts {
  const out: Record<string, number> = { ...a } as Record<string, number>;
  for (const [k, v] of Object.entries(b)) out[k] = (out[k] ?? 0) + (v ?? 0);
  return out;
}

/**
 * One SyncResult for both families: the IPv4 one alone when IPv6 did not
 * run, else counts and times added, details merged by `mergeDetail`, but
 * for `services`: the service ports of `snapshot` of either family, a
 * dual-stack one counted once.
 */
function mergeResults(results: readonly SyncResult[], snapshot: Snapshot, mergeDetail: DualStackBackendOptions['mergeDetail']): SyncResult {
  if (results.length === 1) return results[0]!;
  const [a, b] = results as [SyncResult, SyncResult];
  const detail = mergeDetail(a.detail, b.detail);
  return {
    full: a.full || b.full,
    services: allPortKeys(snapshot).size,
    endpoints: a.endpoints + b.endpoints,
    written: sumCounts(a.written, b.written),
    deleted: sumCounts(a.deleted, b.deleted),
    bytes: a.bytes + b.bytes,
    transactions: a.transactions + b.transactions,
    readMs: a.readMs + b.readMs,
    applyMs: a.applyMs + b.applyMs,
    totalMs: a.totalMs + b.totalMs,
    ...(detail !== undefined ? { detail } : {}),
    ...(a.udpNotNATed || b.udpNotNATed ? { udpNotNATed: true } : {}),
  };
}
