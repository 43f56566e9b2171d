/**
 * iptables mode for both IP families, as kube-proxy's metaproxier runs an
 * IPv4 and an IPv6 proxier side by side (pkg/proxy/metaproxier): one
 * IptablesBackend per family, each fed its family's view of the snapshot
 * (model/family.ts) and writing through its own restore command
 * (`iptables-restore` and `ip6tables-restore`, both `--noflush`).
 *
 * A failure in one family never stops the other (kube-proxy issue 73157):
 * both are synced, and the sync throws afterwards (naming the family) so
 * that the proxier retries with a full sync; the family that failed has
 * forgotten what it programmed, the other is only read back again.
 *
 * The IPv6 family is dormant while there is nothing for it to do: until
 * the snapshot has an IPv6 service port, or a full sync finds drover's
 * chains in the IPv6 tables (left by an earlier run, to be repaired or
 * removed), nothing is read or written through ip6tables, so a node
 * without IPv6 Services runs exactly as before. Once awake it stays awake
 * for the life of the process, as the IPv4 family does; while its view is
 * empty, a failure of the IPv6 family (say, a kernel without IPv6) is
 * logged, not thrown.
 */
import { DroverError } from '../../errors.ts';
import { allPortKeys, familyView } from '../../model/family.ts';
import type { IPFamily, Snapshot } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import type { Backend, ChangeSet, CleanupResult, ObjectCounts, SyncResult } from '../types.ts';
import { IptablesBackend } from './backend.ts';
import type { IptablesExec } from './exec.ts';
import type { RenderOptions } from './render.ts';
import type { StaticRuleset } from './static.ts';

/** One family's part of a {@link DualStackIptablesBackend}. */
export interface FamilyPart {
  readonly exec: IptablesExec;
  readonly render: RenderOptions;
  readonly statics: StaticRuleset;
}

/** Options of {@link DualStackIptablesBackend}: each family's I/O, render options (the IPv6 ones with `family: 'IPv6'`) and static rules. */
export interface DualStackOptions {
  readonly IPv4: FamilyPart;
  readonly IPv6: FamilyPart;
  readonly logger: Logger;
  /** As IptablesBackendOptions.maxLinesPerTransaction, for each family. */
  readonly maxLinesPerTransaction?: number;
}

/** The render options of the IPv6 ruleset: `--masquerade-all` as for IPv4, the IPv6 entry of `--cluster-cidr` (a comma-separated list). */
export function ipv6RenderOptions(render: RenderOptions, clusterCidr: string | undefined): RenderOptions {
  const cidr = clusterCidr?.split(',').find((c) => c.includes(':'));
  return { masqueradeAll: render.masqueradeAll, family: 'IPv6', ...(cidr !== undefined ? { clusterCIDR: cidr } : {}) };
}

/** A sync failure of one family, named. */
export class FamilySyncError extends DroverError {
  constructor(
    readonly failures: ReadonlyArray<{ readonly family: IPFamily; readonly error: unknown }>,
  ) {
    super(failures.map((f) => `${f.family}: ${(f.error as Error)?.message ?? String(f.error)}`).join('; '));
    this.name = 'FamilySyncError';
  }
}

/** iptables mode's Backend for both families (see the module comment). */
export class DualStackIptablesBackend implements Backend {
  readonly mode = 'iptables' as const;
  private readonly backends: Record<IPFamily, IptablesBackend>;
  /** Whether the IPv6 family has woken up (see the module comment). */
  private ipv6Awake = false;
  /** Whether the IPv6 tables were looked at for drover's chains since the start. */
  private ipv6Probed = false;

  constructor(private readonly opts: DualStackOptions) {
    const make = (p: FamilyPart) =>
      new IptablesBackend({
        exec: p.exec,
        render: p.render,
        statics: p.statics,
        logger: opts.logger,
        ...(opts.maxLinesPerTransaction !== undefined ? { maxLinesPerTransaction: opts.maxLinesPerTransaction } : {}),
      });
    this.backends = { IPv4: make(opts.IPv4), IPv6: make(opts.IPv6) };
  }

  /** Sync the IPv4 family, then the IPv6 one when awake; a failure of either is thrown after both ran. */
  async sync(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult> {
    const v6 = familyView(snapshot, 'IPv6');
    if (!this.ipv6Awake && v6.services.size > 0) this.ipv6Awake = true;
    if (!this.ipv6Awake && !this.ipv6Probed) {
      this.ipv6Probed = true;
      this.ipv6Awake = await this.ipv6HasChains();
    }
    const failures: Array<{ family: IPFamily; error: unknown }> = [];
    const results: SyncResult[] = [];
    try {
      results.push(await this.backends.IPv4.sync(familyView(snapshot, 'IPv4'), changes));
    } catch (error) {
      failures.push({ family: 'IPv4', error });
    }
    if (this.ipv6Awake) {
      try {
        results.push(await this.backends.IPv6.sync(v6, changes));
      } catch (error) {
        if (v6.services.size > 0) failures.push({ family: 'IPv6', error });
        else this.opts.logger.warn({ err: (error as Error).message }, 'IPv6 sync failed; no Service has an IPv6 ClusterIP, so the IPv4 sync stands');
      }
    }
    if (failures.length > 0) {
      for (const f of failures) this.opts.logger.error({ family: f.family, err: (f.error as Error)?.message }, 'sync of one IP family failed; the other family was synced');
      throw failures.length === 1 && results.length === 0 ? failures[0]!.error : new FamilySyncError(failures);
    }
    return mergeResults(results, snapshot);
  }

  /** True when the IPv6 nat table holds drover's KUBE-SERVICES chain; false also when ip6tables cannot be read. */
  private async ipv6HasChains(): Promise<boolean> {
    try {
      return (await this.opts.IPv6.exec.listChain('nat', 'KUBE-SERVICES')) !== undefined;
    } catch {
      return false;
    }
  }

  /** The drift check of each awake family; the first reason found. */
  async driftCheck(): Promise<string | undefined> {
    const v4 = await this.backends.IPv4.driftCheck();
    if (v4 !== undefined || !this.ipv6Awake) return v4;
    const v6 = await this.backends.IPv6.driftCheck();
    return v6 === undefined ? undefined : `IPv6: ${v6}`;
  }

  /** Clean up both families (IPv6 only when ip6tables can be read); counts summed, kept chains of both. */
  async cleanup(): Promise<CleanupResult> {
    const v4 = await this.backends.IPv4.cleanup();
    let v6: CleanupResult | undefined;
    try {
      v6 = await this.backends.IPv6.cleanup();
    } catch (err) {
      if (await this.ipv6HasChains()) throw err;
      this.opts.logger.debug({ err: (err as Error).message }, 'IPv6 tables not cleaned: ip6tables cannot read them');
    }
    if (v6 === undefined) return v4;
    return { removed: sumCounts(v4.removed, v6.removed), kept: [...v4.kept, ...v6.kept.map((k) => ({ ...k, table: `${k.table} (IPv6)` }))] };
  }
}

/** Counts by kind, added. */
function sumCounts(a: ObjectCounts, b: ObjectCounts): ObjectCounts {
  const out: Record<string, number> = { ...a } as Record<string, number>;
  for (const [k, v] of Object.entries(b)) out[k] = (out[k] ?? 0) + (v ?? 0);
  return out;
}

/**
 * One SyncResult for both families: the IPv4 one alone when IPv6 did not
 * run, else counts and times added, but for `services`: the service ports
 * of `snapshot` of either family, a dual-stack one counted once.
 */
function mergeResults(results: readonly SyncResult[], snapshot: Snapshot): SyncResult {
  if (results.length === 1) return results[0]!;
  const [a, b] = results as [SyncResult, SyncResult];
  const detail =
    a.detail?.mode === 'iptables' && b.detail?.mode === 'iptables'
      ? {
          mode: 'iptables' as const,
          rules: { filter: a.detail.rules.filter + b.detail.rules.filter, nat: a.detail.rules.nat + b.detail.rules.nat },
          written: { filter: a.detail.written.filter + b.detail.written.filter, nat: a.detail.written.nat + b.detail.written.nat },
        }
      : a.detail;
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
  };
}
