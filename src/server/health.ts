/**
 * The proxy's own health, as kube-proxy's healthz server decides it
 * (pkg/proxy/healthcheck/proxy_health.go): healthy while no queued sync has
 * waited longer than `timeoutMs` (kube-proxy: twice the sync period)
 * without a successful sync since. drover queues a sync when the source
 * changes and when a failed sync is to be retried, so a node whose syncs
 * keep failing turns unhealthy after the timeout even when nothing changes.
 *
 * `/healthz` also answers 503 when the node is not eligible (kube-proxy's
 * SyncNode): this node's Node, in the snapshot of the last successful
 * sync, is being deleted or carries the cluster autoscaler's
 * `ToBeDeletedByClusterAutoscaler` taint (NodeInfo.leaving), or it was
 * there and is gone. A source that never described this node (a manifest
 * folder without a Node) leaves it eligible. `/livez` ignores the node.
 */
import type { NodeInfo } from '../model/types.ts';
import type { Proxier } from '../proxier/proxier.ts';

/** The answer to a health probe: HTTP status and the JSON body, as kube-proxy writes them. */
export interface HealthAnswer {
  readonly status: 200 | 503;
  readonly body: string;
}

/** Health state of one `drover run`. Times in ms since the epoch. */
export class ProxyHealth {
  private lastUpdated: number | undefined;
  private oldestQueued: number | undefined;
  private nodeEligible = true;
  /** Whether a snapshot ever described this node. */
  private nodeSeen = false;

  /**
   * @param timeoutMs how long a queued sync may wait (kube-proxy: 2 × --sync-period)
   * @param now the clock (tests pass their own)
   */
  constructor(
    private readonly timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Follow `proxier`: a queued sync starts the wait, a successful sync ends it. @returns a function that stops following. */
  listen(proxier: Pick<Proxier, 'on'>): () => void {
    const offQueued = proxier.on('queued', () => this.queued());
    const offSync = proxier.on('sync', (last) => {
      if (last.error !== undefined) return;
      this.updated();
      if (last.snapshot) this.followNode(last.snapshot.node);
    });
    return () => {
      offQueued();
      offSync();
    };
  }

  /** A sync was queued (kube-proxy QueuedUpdate): the oldest one not yet followed by a success is kept. */
  queued(): void {
    this.oldestQueued ??= this.now();
  }

  /** A sync succeeded (kube-proxy Updated). */
  updated(): void {
    this.oldestQueued = undefined;
    this.lastUpdated = this.now();
  }

  /** Whether the node may take traffic (false while it is deleted or tainted for deletion). */
  setNodeEligible(eligible: boolean): void {
    this.nodeEligible = eligible;
  }

  /**
   * Follow this node's Node as a synced snapshot describes it (undefined:
   * none): not eligible while it is leaving, or once it is gone after
   * having been there.
   * @returns why the node is not eligible, or undefined when it is.
   */
  followNode(node: NodeInfo | undefined): string | undefined {
    // A node known by name alone has no Node object: as absent as none.
    const present = node !== undefined && node.nameOnly !== true;
    if (present) this.nodeSeen = true;
    const why = node?.leaving ?? (!present && this.nodeSeen ? 'its Node is gone' : undefined);
    this.setNodeEligible(why === undefined);
    return why;
  }

  /** True unless a queued sync has waited `timeoutMs` or longer. */
  isHealthy(): boolean {
    return this.oldestQueued === undefined || this.now() - this.oldestQueued < this.timeoutMs;
  }

  /**
   * `/healthz`: 200 when healthy and the node is eligible, else 503; the body
   * is kube-proxy's `{"lastUpdated": …,"currentTime": …, "nodeEligible": …}`
   * (lastUpdated is the current time when healthy, as in kube-proxy).
   */
  healthz(): HealthAnswer {
    return this.answer(true);
  }

  /** `/livez`: as {@link healthz} without the node's eligibility (and without it in the body). */
  livez(): HealthAnswer {
    return this.answer(false);
  }

  private answer(withNode: boolean): HealthAnswer {
    const healthy = this.isHealthy() && (!withNode || this.nodeEligible);
    const current = this.now();
    const times = `{"lastUpdated": ${timestamp(healthy ? current : this.lastUpdated)},"currentTime": ${timestamp(current)}`;
    return { status: healthy ? 200 : 503, body: withNode ? `${times}, "nodeEligible": ${this.nodeEligible}}` : `${times}}` };
  }
}

/** A JSON string of the time in RFC 3339 (ISO 8601, UTC); Go's zero time when there is none. */
function timestamp(ms: number | undefined): string {
  return JSON.stringify(ms === undefined ? '0001-01-01T00:00:00Z' : new Date(ms).toISOString());
}
