/**
 * The IPVS backend (`drover run --mode ipvs`), after kube-proxy's IPVS
 * proxier (pkg/proxy/ipvs/proxier.go): the same model, sync loop and CLI as
 * iptables mode; only what is programmed differs.
 *
 * Each sync:
 * 1. (full syncs) sets the IPVS sysctls (sysctl.ts) and makes sure the dummy
 *    link kube-ipvs0 exists (link.ts);
 * 2. reads the kernel back. A full sync (first sync, when the drift check
 *    suspects drift, every --full-sync-period, after a failure) reads `ipset save`, the addresses of kube-ipvs0, every
 *    virtual server with its real servers, and `iptables-save`. A partial
 *    sync (a source change) recomputes only the changed service ports'
 *    desired state (assemble.ts, DesiredIndex), reads only their virtual
 *    servers, and trusts what it wrote for the ipsets and kube-ipvs0, as
 *    iptables mode's partial sync does: it writes exactly the set entries
 *    and addresses that became wanted or stopped being wanted. Its cost
 *    grows with the change, not with the number of services;
 * 3. writes only the differences, in this order: ipsets (one
 *    `ipset restore -exist`: the iptables rules match on the sets), iptables
 *    rules (one `iptables-restore --noflush`, full syncs only: IPVS mode's
 *    rules do not depend on services), new addresses on kube-ipvs0
 *    (ClusterIPs, and external and LoadBalancer IPs the host does not
 *    have), IPVS commands (reconcile.ts), then stale addresses off kube-ipvs0.
 *
 * Every service port gets its ClusterIP virtual server and, when it has
 * them, those of its NodePort (one per node address, `nodeAddresses`, read
 * once at start), external IPs and LoadBalancer ingress IPs (frontends.ts).
 * A virtual server is drover's to delete when its address is in
 * `--service-cidr`, bound to kube-ipvs0, or one of the host's own addresses
 * (where NodePorts live): an operator's virtual server on a node address is
 * therefore removed too, as kube-proxy removes every one it did not make.
 *
 * On an incomplete source (`changes.incomplete`) a full sync deletes no
 * virtual server the snapshot does not list, nor its set entries and
 * kube-ipvs0 address (keep.ts).
 *
 * A restart adopts what is there: state that matches produces no command. A
 * removed endpoint's real server goes through graceful termination
 * (graceful.ts); the pending ones are checked on every full sync, on a
 * partial sync that reads their virtual server, and every
 * `gracefulCheckIntervalMs` (5 s) while any are pending.
 *
 * Between full syncs, at each sync period, driftCheck (drift.ts) looks for
 * changes behind drover's back without dumping every real server.
 *
 * Everything runs in the network namespace of the process: IPVS and
 * rtnetlink sockets cannot be pointed at another one.
 *
 * One backend programs one IP family (`family`, default IPv4), as one of
 * kube-proxy's IPVS proxiers does: its virtual servers, its sets
 * (ipset.ts familySetName: KUBE-6-… for IPv6), its addresses on the shared
 * kube-ipvs0 (/128 for IPv6), its rules (iptables or ip6tables, `iptables`
 * is of the family) and its sysctls. dual-stack.ts runs one per family.
 */
import { DroverError } from '../../errors.ts';
import type { IPFamily, Snapshot } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import type { Backend, ChangeSet, CleanupResult, ObjectCounts, SyncResult } from '../../proxier/backend.ts';
import { ServedFrontends } from '../shared/served-frontends.ts';
import type { IptablesExec } from '../../kernel/iptables/exec.ts';
import { parseSave } from '../../kernel/iptables/parse.ts';
import { emptyPlan, isEmptyPlan, planStats, planToRestore, type Plan } from '../../kernel/iptables/plan.ts';
import type { RenderOptions } from '../../config/render.ts';
import { IptablesDriftWatch } from '../shared/kube-chains/drift-watch.ts';
import { cleanupPlan } from '../shared/kube-chains/ruleset.ts';
import type { StaticRuleset } from '../shared/kube-chains/static.ts';
import type { VirtualServerKey } from '../../kernel/ipvs/codec.ts';
import { DesiredIndex, type DesiredDelta } from './assemble.ts';
import { isCanonicalIPv4CIDR, parseCIDR } from '../../model/addr.ts';
import { inLayout } from './owned.ts';
import { NO_NODE_ADDRESSES, type NodeAddresses } from './frontends.ts';
import { desiredServicePort, virtualServerKey, type DesiredIpvsState, type DesiredVirtualServer } from './desired.ts';
import { addressDrift, checkWindow, realServerChecks, realServerDrift, virtualServerDrift } from './drift.ts';
import { checkPending, type PendingRemoval } from './graceful.ts';
import { familySetName, IPVS_SETS, ownedSetNames, parseIpsetSave, planIpsetChanges, planIpsetDestroy, planIpsetRestore, type IpsetPlan } from './ipset.ts';
import type { IpsetExec, SavedSet } from '../../kernel/ipset/ipset.ts';
import { applyOps, readSomeVirtualServers, readVirtualServers, type IpvsKernel, type KernelRead } from './kernel.ts';
import { DUMMY_INTERFACE, hostPrefixLength, planAddresses, type AddressPlan, type InterfaceAddress, type LinkManager } from '../../kernel/rtnetlink/link.ts';
import { fullSyncTargets, NOTHING_KEPT, type KeptIpvsState } from './keep.ts';
import { IpvsClientClosedError } from '../../kernel/ipvs/client.ts';
import { countOps, describeOp, planIpvs, type IpvsOp } from './reconcile.ts';
import { iptablesModeStatics, ipvsRulesPlan, ipvsStaticRules } from './rules.ts';
import { applyIpvsSysctls, ipvsSysctls, sysctlDrift, type Sysctls } from './sysctl.ts';
import type { IpvsSyncDetail } from './sync-detail.ts';

/** Options of the IPVS backend. Times in milliseconds. */
export interface IpvsBackendOptions {
  /** IPVS over generic netlink (IpvsClient), or FakeIpvs. */
  readonly ipvs: IpvsKernel;
  /** Called to get a new IPVS client after the current one closed itself (a timeout or socket error). */
  readonly reopenIpvs?: () => Promise<IpvsKernel>;
  readonly ipset: IpsetExec;
  /** iptables of the family (ip6tables for IPv6). */
  readonly iptables: IptablesExec;
  readonly links: LinkManager;
  readonly sysctls: Sysctls;
  /** `--cluster-cidr` and `--masquerade-all`. */
  readonly render: RenderOptions;
  /** `--ipvs-scheduler`, e.g. "rr". */
  readonly scheduler: string;
  /**
   * `--service-cidr` (a CIDR of `family`; optional for IPv6, where
   * `--service-cidr` names no range): an unwanted virtual server in it is
   * deleted (so is one on an address bound to kube-ipvs0, or on one of
   * `nodeAddresses.hostAddresses`); any other one is left alone.
   */
  readonly serviceCIDR?: string;
  /** The IP family programmed (default IPv4); everything of the other family is left alone. */
  readonly family?: IPFamily;
  /**
   * The host's addresses, read once at start (node-ips.ts): where NodePorts
   * get virtual servers, and which external and ingress IPs are not bound
   * to kube-ipvs0. Default none: no NodePort virtual server.
   */
  readonly nodeAddresses?: NodeAddresses;
  /** `--ipvs-graceful-period`: longest wait for a removed real server's connections to end. */
  readonly gracefulPeriodMs: number;
  /** Period of the graceful-termination check while real servers are pending (default 5000; 0: only on syncs). */
  readonly gracefulCheckIntervalMs?: number;
  readonly logger: Logger;
  /** IPVS mode's static iptables rules; default: rules/ipvs/static.rules (static6.rules for IPv6) for `render`. */
  readonly statics?: StaticRuleset;
  /** The clock, ms since the epoch (tests). */
  readonly now?: () => number;
}

/**
 * An IPVS cleanup in which some steps failed (IpvsBackend.cleanup): every
 * step ran; `failed` names each failed one with its error, `partial` holds
 * what the others removed.
 */
export class IpvsCleanupError extends DroverError {
  constructor(
    readonly family: IPFamily,
    readonly failed: readonly { readonly step: string; readonly error: string }[],
    readonly partial: CleanupResult,
  ) {
    super(`${family} IPVS cleanup could not remove everything: ${failed.map((f) => `${f.step}: ${f.error}`).join('; ')}`);
    this.name = 'IpvsCleanupError';
  }
}

/** IPVS-mode Backend. */
export class IpvsBackend implements Backend {
  readonly mode = 'ipvs' as const;
  private readonly statics: StaticRuleset;
  private readonly now: () => number;
  private ipvs: IpvsKernel | undefined;
  /** What the last successful sync left in the kernel; null = unknown, so the next sync is full. */
  private applied: AppliedState | null = null;
  private pending = new Map<string, PendingRemoval>();
  private linkIndex: number | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The cheap drift check of IPVS mode's iptables rules (iptables/drift-watch.ts). */
  private readonly watch: IptablesDriftWatch;
  /** Where the next drift check's window of real servers starts (drift.ts). */
  private checkCursor = 0;
  private readonly nodeAddresses: NodeAddresses;
  /** The host's own addresses (frontends.ts NodeAddresses.hostAddresses). */
  private readonly hostAddresses: ReadonlySet<string>;
  private readonly family: IPFamily;
  /** The frontends served, settled once for every mode (shared/served-frontends.ts). */
  private readonly served: ServedFrontends;
  /** The prefix length of a bound address: 32, or 128 for IPv6. */
  private readonly fullLength: number;

  /**
   * @throws Error for a service CIDR that is not a CIDR of the family (or
   *   missing for IPv4) or a graceful period that is not a non-negative
   *   number of milliseconds (the CLI validates both first); Error or
   *   IptablesParseError for a bad rules file.
   */
  constructor(private readonly opts: IpvsBackendOptions) {
    this.family = opts.family ?? 'IPv4';
    this.served = new ServedFrontends(this.family, opts.logger);
    this.fullLength = hostPrefixLength(this.family);
    const cidr = opts.serviceCIDR;
    const ok = this.family === 'IPv4' ? cidr !== undefined && isCanonicalIPv4CIDR(cidr) : cidr === undefined || parseCIDR(cidr)?.prefix.family === 6;
    if (!ok) {
      throw new Error(`IPVS backend: service CIDR ${JSON.stringify(cidr)} is not an ${this.family} CIDR`);
    }
    if (!Number.isFinite(opts.gracefulPeriodMs) || opts.gracefulPeriodMs < 0) {
      throw new Error(`IPVS backend: graceful period ${opts.gracefulPeriodMs} ms is not a non-negative duration`);
    }
    this.statics = opts.statics ?? ipvsStaticRules(opts.render, undefined, this.family);
    this.now = opts.now ?? Date.now;
    this.ipvs = opts.ipvs;
    this.watch = new IptablesDriftWatch(opts.iptables, this.statics, opts.logger);
    this.nodeAddresses = opts.nodeAddresses ?? NO_NODE_ADDRESSES;
    this.hostAddresses = new Set(this.nodeAddresses.hostAddresses);
  }

  /**
   * True for a virtual server drover may delete when it is not wanted (see
   * {@link IpvsBackendOptions.serviceCIDR}): its address is in the service
   * CIDR, bound to kube-ipvs0 (`bound`), or one of the host's own addresses
   * (NodePorts, external IPs the host has).
   */
  private owns(vs: VirtualServerKey, bound: ReadonlySet<string>): boolean {
    return inLayout(vs.address, { serviceCIDR: this.opts.serviceCIDR, bound, host: this.hostAddresses });
  }

  /** Real servers in graceful termination, sorted by key. */
  pendingRemovals(): PendingRemoval[] {
    return [...this.pending.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, p]) => p);
  }

  /**
   * Write what differs (see the module comment). Reports `chain` and `rule`
   * (iptables), `virtual server`, `real server`, `set entry` and `address`
   * written and deleted, and IPVS mode's detail (sync-detail.ts).
   */
  sync(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult> {
    return this.exclusive(() => {
      const settled = this.served.settle(snapshot, changes);
      return this.syncLocked(settled.view, settled.changes);
    });
  }

  private async syncLocked(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult> {
    const start = performance.now();
    const prev = changes.full ? null : this.applied;
    const full = prev === null;
    const { logger } = this.opts;
    try {
      const ipvs = await this.client();
      const planOpts = { scheduler: this.opts.scheduler, nodeAddresses: this.nodeAddresses };
      // Desired state: a partial sync updates the applied index with the
      // changed service ports only, and gets back exactly what changed.
      let index: DesiredIndex;
      let desired: DesiredIpvsState | undefined;
      let delta: DesiredDelta | undefined;
      if (prev) {
        index = prev.index;
        delta = index.update(new Map([...changes.changed].map((key) => {
          const sp = snapshot.services.get(key);
          return [key, sp ? desiredServicePort(sp, planOpts, snapshot.node) : undefined];
        })));
      } else {
        index = DesiredIndex.of([...snapshot.services.values()].map((sp) => desiredServicePort(sp, planOpts, snapshot.node)));
        desired = index.state();
      }
      const conflicts = delta ? delta.conflicts : desired!.conflicts;
      if (conflicts.length > 0) {
        logger.warn({ servicePorts: conflicts }, 'service ports share a ClusterIP:port/protocol with another one; only the first is programmed');
      }
      if (full || this.linkIndex === undefined) await this.prepare();
      const linkIndex = this.linkIndex!;

      // Read: a full sync reads everything back; a partial sync only the
      // virtual servers of the changed service ports, and trusts what it
      // wrote for the ipsets and kube-ipvs0 (as iptables mode's partial sync).
      const readStart = performance.now();
      let kernel: KernelRead;
      let tables: ReturnType<typeof parseSave> | undefined;
      let owned: (vs: VirtualServerKey) => boolean;
      let ipsetPlan: IpsetPlan;
      let addressPlan: AddressPlan;
      let kept: KeptIpvsState = NOTHING_KEPT;
      if (delta) {
        owned = (vs) => this.owns(vs, prev!.bound);
        kernel = await readSomeVirtualServers(ipvs, [...delta.virtualServers.values()].map((v) => v.vs));
        ipsetPlan = planIpsetChanges([...delta.sets].map(([set, d]) => ({ set, ...d })), this.family);
        addressPlan = { add: delta.addresses.add, remove: delta.addresses.del.map((address) => ({ address, prefixLength: this.fullLength })) };
      } else {
        const want = desired!;
        let sets: Map<string, SavedSet>;
        let addresses: InterfaceAddress[];
        [sets, tables, addresses] = await Promise.all([
          this.opts.ipset.save().then((text) => parseIpsetSave(text, ownedSetNames(this.family))),
          this.readTables(),
          this.opts.links.addresses(linkIndex, this.family),
        ]);
        const bound = new Set(addresses.map((a) => a.address));
        owned = (vs) => this.owns(vs, bound);
        kernel = await readVirtualServers(ipvs, (vs) => owned(vs) || want.virtualServers.has(virtualServerKey(vs)));
        // On an incomplete source nothing of a virtual server the snapshot does not list is deleted (keep.ts).
        const targets = fullSyncTargets(want, kernel.state, owned, changes.incomplete === true, bound, this.hostAddresses);
        ({ owned, kept } = targets);
        if (kept.servers.length > 0) logger.info({ virtualServers: kept.servers }, 'ipvs: source incomplete; unlisted virtual servers left in place');
        ipsetPlan = planIpsetRestore(targets.sets, sets, this.family);
        addressPlan = planAddresses(targets.addresses, addresses, this.fullLength);
      }
      const readMs = performance.now() - readStart;
      if (kernel.unsupported.length > 0) logger.debug({ entries: kernel.unsupported }, 'ipvs: left alone entries drover does not manage (fwmark)');

      // Plan (pure).
      const rules: Plan = tables ? ipvsRulesPlan(this.statics, tables, iptablesModeStatics(this.family)) : emptyPlan();
      const rulesPayload = planToRestore(rules);
      const scoped = delta ? wantedIn(delta) : desired!.virtualServers;
      const ipvsPlan = planIpvs(scoped, kernel.state, {
        owned,
        pending: this.pending,
        now: this.now(),
        gracefulPeriodMs: this.opts.gracefulPeriodMs,
        withheld: (key) => index.isWithheld(key),
      });

      // Apply, in dependency order.
      const applyStart = performance.now();
      if (ipsetPlan.input !== '') await this.opts.ipset.restore(ipsetPlan.input);
      if (rulesPayload !== '') await this.opts.iptables.restore(rulesPayload);
      await this.bind(linkIndex, addressPlan.add);
      this.pending = ipvsPlan.pending;
      await applyOps(ipvs, ipvsPlan.ops);
      await this.unbind(linkIndex, addressPlan.remove);
      const wrote = ipsetPlan.input !== '' || rulesPayload !== '' || addressPlan.add.length + addressPlan.remove.length + ipvsPlan.ops.length > 0;
      const applyMs = wrote ? performance.now() - applyStart : 0;

      // kube-ipvs0 now holds exactly the wanted ClusterIPs.
      const bound = prev ? prev.bound : new Set([...desired!.addresses, ...kept.addresses]);
      if (prev) {
        for (const a of addressPlan.add) bound.add(a);
        for (const a of addressPlan.remove) bound.delete(a.address);
      }
      // What a full sync kept for an incomplete source stays until a full sync on a whole one.
      this.applied = { index, bound, kept: prev ? prev.kept : kept.servers.length > 0 };
      if (full) await this.watch.afterFullSync();
      const ops = countOps(ipvsPlan.ops);
      const detail: IpvsSyncDetail = {
        mode: 'ipvs',
        ops,
        addressesAdded: addressPlan.add.length,
        addressesRemoved: addressPlan.remove.length,
        ipsetAdded: ipsetPlan.added,
        ipsetDeleted: ipsetPlan.deleted,
        ipsetRebuilt: ipsetPlan.rebuilt,
        ipsetLeftovers: ipsetPlan.leftovers,
        pending: this.pending.size,
        ipvsReads: kernel.requests,
      };
      this.logApplied(detail, ipvsPlan.ops);
      this.schedule();
      const iptables = planStats(rules);
      return {
        full,
        services: snapshot.services.size,
        endpoints: index.servingEndpoints,
        written: {
          ...iptables.written,
          'virtual server': ops['add-service'] + ops['edit-service'],
          'real server': ops['add-dest'] + ops['edit-dest'] + ops['quiesce-dest'],
          'set entry': ipsetPlan.added,
          address: addressPlan.add.length,
        },
        deleted: {
          ...iptables.deleted,
          'virtual server': ops['del-service'],
          'real server': ops['del-dest'],
          'set entry': ipsetPlan.deleted,
          address: addressPlan.remove.length,
        },
        bytes: Buffer.byteLength(rulesPayload) + Buffer.byteLength(ipsetPlan.input),
        transactions: (rulesPayload !== '' ? 1 : 0) + (ipsetPlan.input !== '' ? 1 : 0),
        readMs,
        applyMs,
        totalMs: performance.now() - start,
        detail,
      };
    } catch (err) {
      this.applied = null;
      this.watch.forget();
      this.forgetIfClosed(err);
      throw err;
    }
  }

  /** Sysctls and kube-ipvs0. */
  private async prepare(): Promise<void> {
    const list = ipvsSysctls(this.family);
    const written = await applyIpvsSysctls(this.opts.sysctls, list);
    if (written.length > 0) {
      this.opts.logger.info({ sysctls: list.map((s) => `${s.name}=${s.value}`), written }, `set sysctls ${written.join(', ')}`);
    }
    const link = await this.opts.links.ensureDummy(DUMMY_INTERFACE);
    if (link.created) this.opts.logger.info({ interface: DUMMY_INTERFACE, index: link.index }, `created dummy interface ${DUMMY_INTERFACE}`);
    this.linkIndex = link.index;
  }

  private async readTables(): Promise<ReturnType<typeof parseSave>> {
    const [filter, nat] = await Promise.all([this.opts.iptables.save('filter'), this.opts.iptables.save('nat')]);
    return parseSave(`${filter}\n${nat}`);
  }

  private async bind(index: number, add: readonly string[]): Promise<void> {
    await inBatches(add, 32, (a) => this.opts.links.addAddress(index, a));
  }

  private async unbind(index: number, remove: readonly InterfaceAddress[]): Promise<void> {
    await inBatches(remove, 32, (a) => this.opts.links.delAddress(index, a));
  }

  private logApplied(detail: IpvsSyncDetail, ops: readonly IpvsOp[]): void {
    const changed = ops.length + detail.addressesAdded + detail.addressesRemoved + detail.ipsetAdded + detail.ipsetDeleted + detail.ipsetRebuilt.length + detail.ipsetLeftovers.length > 0;
    const { logger } = this.opts;
    if (detail.ipsetRebuilt.length > 0) {
      logger.warn({ sets: detail.ipsetRebuilt }, `ipset: rebuilt ${detail.ipsetRebuilt.join(', ')}: it held entries drover never writes (added by hand?)`);
    }
    for (const op of ops) {
      if (op.kind === 'quiesce-dest') logger.info({ op: describeOp(op) }, 'ipvs: real server quiesced (weight 0) until its connections end');
    }
    logger[changed ? 'info' : 'debug']({ ...detail, ops: Object.fromEntries(Object.entries(detail.ops).filter(([, n]) => n > 0)) }, 'ipvs: sync applied');
  }

  /**
   * The cheap drift check (drift.ts): IPVS mode's canary chains and hook
   * jumps, one dump of every virtual server, kube-ipvs0's addresses, the
   * ipsets' entry counts, and the real servers of a rotating window of
   * virtual servers. Runs after any sync in progress.
   * @returns a reason when the kernel differs from what drover programmed; undefined when nothing suggests it.
   * @throws what a read threw (the proxier then syncs in full).
   */
  driftCheck(): Promise<string | undefined> {
    return this.exclusive(async () => {
      const applied = this.applied;
      if (applied === null || this.linkIndex === undefined) return 'nothing is known to be programmed';
      if (applied.kept) return 'the last full sync kept virtual servers of an incomplete source, which only a full read-back checks';
      const rules = await this.watch.check();
      if (rules !== undefined) return rules;
      const sysctl = await sysctlDrift(this.opts.sysctls, ipvsSysctls(this.family));
      if (sysctl !== undefined) return sysctl;
      const ipvs = await this.client();
      const { index, bound } = applied;
      const owned = (vs: VirtualServerKey) => this.owns(vs, bound);
      const drainingKeys = new Set([...this.pending.values()].map((p) => virtualServerKey(p.vs)));
      const draining = (key: string) => drainingKeys.has(key) && index.isWithheld(key);
      const servers = virtualServerDrift(index, (await this.dropIfClosed(ipvs.dumpServices())).entries, owned, draining);
      if (servers !== undefined) return servers;
      const addresses = addressDrift(bound, await this.opts.links.addresses(this.linkIndex, this.family), this.fullLength);
      if (addresses !== undefined) return addresses;
      for (const { name: set } of IPVS_SETS) {
        const want = index.setSize(set);
        const name = familySetName(set, this.family);
        const have = await this.opts.ipset.entryCount(name);
        if (have === undefined) return `ipset ${name} is gone`;
        if (have !== want) return `ipset ${name} has ${have} entries, not the ${want} drover wrote`;
      }
      const { picked, next } = checkWindow([...index.serverKeys()], this.checkCursor, realServerChecks(index.serverCount));
      this.checkCursor = next;
      for (const key of picked) {
        const want = index.server(key)!;
        const reals = realServerDrift(want, (await this.dropIfClosed(ipvs.dumpDests(want.vs))).entries, this.pending);
        if (reals !== undefined) return reals;
      }
      return undefined;
    });
  }

  /**
   * Check the real servers in graceful termination now: delete those whose
   * connections ended or whose graceful period is over (kube-proxy's
   * tryDeleteRs). Runs after any sync in progress. Errors are logged, not thrown.
   * @returns the number of real servers deleted
   */
  checkGraceful(): Promise<number> {
    return this.exclusive(async () => {
      if (this.pending.size === 0) return 0;
      const { logger } = this.opts;
      try {
        const ipvs = await this.client();
        const vsKeys = new Map([...this.pending.values()].map((p) => [virtualServerKey(p.vs), p.vs]));
        const dests = new Map<string, Awaited<ReturnType<IpvsKernel['dumpDests']>>['entries']>();
        for (const [key, vs] of vsKeys) dests.set(key, (await this.dropIfClosed(ipvs.dumpDests(vs))).entries);
        const check = checkPending(this.pending, dests, this.now(), this.opts.gracefulPeriodMs);
        this.pending = check.pending;
        const ops: IpvsOp[] = check.deletes.map((p) => ({ kind: 'del-dest', vs: p.vs, rs: p.rs }));
        // A withheld virtual server (reconcile.ts) goes with the last real server that drained there.
        const emptied = withheldEmptied(vsKeys, dests, check, (key) => this.applied?.index.isWithheld(key) === true);
        await applyOps(ipvs, ops);
        await applyOps(ipvs, emptied.map((vs): IpvsOp => ({ kind: 'del-service', vs })));
        for (const op of ops) logger.info({ op: describeOp(op) }, 'ipvs: real server deleted after graceful termination');
        for (const vs of emptied) logger.info({ virtualServer: virtualServerKey(vs) }, 'ipvs: withheld virtual server deleted after its real servers drained');
        return ops.length;
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'ipvs: graceful termination check failed; will retry');
        return 0;
      } finally {
        this.schedule();
      }
    });
  }

  /** Arm the periodic graceful-termination check while real servers are pending. */
  private schedule(): void {
    const interval = this.opts.gracefulCheckIntervalMs ?? 5000;
    if (this.closed || interval <= 0 || this.pending.size === 0 || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.checkGraceful();
    }, interval);
    // A pending check must not keep `drover sync --once` alive.
    this.timer.unref();
  }

  /** Stop the periodic check. The kernel state is left as it is. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * Remove what IPVS mode created for the family: its iptables chains and
   * hooks, the virtual servers it owns (in `--service-cidr` or bound to
   * kube-ipvs0), kube-ipvs0 itself (or, while the link still holds
   * addresses of the other family, only this family's addresses on it: the
   * other family's cleanup deletes it), and its ipsets. Other virtual
   * servers, rules and sets are left alone. Reports `chain`, `rule`,
   * `virtual server`, `link`, `address` and `set` removed.
   *
   * Each step (iptables rules, virtual servers, kube-ipvs0 or this family's
   * addresses on it, ipsets, canary chains) runs even when an earlier one
   * failed, so that one failure (the IPVS netlink socket, the xtables lock)
   * does not leave the rest behind, e.g. kube-ipvs0 with this family's
   * addresses.
   * @throws IpvsCleanupError after every step ran, when some failed: it
   *   names each failed step and its error, and holds what was removed.
   */
  cleanup(): Promise<CleanupResult> {
    return this.exclusive(async () => {
      const { logger } = this.opts;
      this.applied = null;
      this.pending.clear();
      const failed: { step: string; error: string }[] = [];
      const step = async <T>(name: string, fn: () => Promise<T>, otherwise: T): Promise<T> => {
        try {
          return await fn();
        } catch (err) {
          failed.push({ step: name, error: err instanceof Error ? err.message : String(err) });
          return otherwise;
        }
      };

      const noPlan = { deleted: {} as ObjectCounts, kept: [] as CleanupResult['kept'] };
      const { deleted: iptables, kept } = await step('iptables rules', async () => {
        const { plan, kept } = cleanupPlan(this.statics, await this.readTables());
        if (!isEmptyPlan(plan)) await this.opts.iptables.restore(planToRestore(plan));
        return { deleted: planStats(plan).deleted as ObjectCounts, kept };
      }, noPlan);

      const index = await step('find kube-ipvs0', () => this.opts.links.find(DUMMY_INTERFACE), undefined);
      const mine = index === undefined ? [] : await step(`read ${this.family} addresses of ${DUMMY_INTERFACE}`, () => this.opts.links.addresses(index, this.family), []);
      const bound = new Set(mine.map((a) => a.address));
      const deletedServices = await step('virtual servers', async () => {
        const ipvs = await this.client();
        const services = await ipvs.dumpServices();
        const ops: IpvsOp[] = services.entries
          .filter((s) => this.owns(s, bound))
          .map((s) => ({ kind: 'del-service', vs: { protocol: s.protocol, address: s.address, port: s.port } }));
        await applyOps(ipvs, ops);
        return ops.length;
      }, 0);
      // The link is shared by both families: the last one to clean up deletes it.
      const link = index === undefined ? { deleted: false, unbound: 0 } : await step(`${DUMMY_INTERFACE} ${this.family} addresses`, async () => {
        const others = await this.opts.links.addresses(index, this.family === 'IPv4' ? 'IPv6' : 'IPv4');
        if (others.length === 0) {
          await this.opts.links.deleteLink(index);
          return { deleted: true, unbound: 0 };
        }
        await this.unbind(index, mine);
        return { deleted: false, unbound: mine.length };
      }, { deleted: false, unbound: 0 });
      this.linkIndex = undefined;
      const sets = await step('ipsets', async () => {
        const names = ownedSetNames(this.family);
        const destroy = planIpsetDestroy(parseIpsetSave(await this.opts.ipset.save(), names), this.family);
        if (destroy !== '') await this.opts.ipset.restore(destroy);
        return destroy.split('\n').filter(Boolean).length;
      }, 0);
      // The canaries last: the xtables lock busy past its wait fails only this step.
      const canaries = await step('canary chains', () => this.watch.removeCanaries(), 0);
      const removed: ObjectCounts = {
        ...iptables,
        chain: (iptables.chain ?? 0) + canaries,
        'virtual server': deletedServices,
        link: link.deleted ? 1 : 0,
        ...(index !== undefined && !link.deleted ? { address: link.unbound } : {}),
        set: sets,
      };
      if (failed.length > 0) {
        logger.error({ removed, failed }, 'IPVS cleanup left some state behind');
        throw new IpvsCleanupError(this.family, failed, { removed, kept });
      }
      logger.info({ removed, chainsKept: kept.map((k) => `${k.table} ${k.chain}`) }, 'removed drover IPVS state, chains and hook rules');
      return { removed, kept };
    });
  }

  /**
   * `request`, forgetting the IPVS client when it closed itself (see
   * {@link forgetIfClosed}).
   * @throws what `request` threw.
   */
  private async dropIfClosed<T>(request: Promise<T>): Promise<T> {
    try {
      return await request;
    } catch (err) {
      this.forgetIfClosed(err);
      throw err;
    }
  }

  /** After `err`: forget the IPVS client when it closed itself (a timeout or socket error), so that the next request opens a new one. */
  private forgetIfClosed(err: unknown): void {
    if (err instanceof IpvsClientClosedError && this.opts.reopenIpvs) this.ipvs = undefined;
  }

  private async client(): Promise<IpvsKernel> {
    if (!this.ipvs) {
      if (!this.opts.reopenIpvs) throw new Error('IPVS client is closed');
      this.ipvs = await this.opts.reopenIpvs();
    }
    return this.ipvs;
  }

  /** Run `fn` after everything queued before it (syncs, checks and cleanup never overlap). */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }
}

/** What the last successful sync left in the kernel, as drover wrote it. */
interface AppliedState {
  /** Every service port's share of the desired state; the ipsets, kube-ipvs0 and virtual servers hold what it wants. */
  readonly index: DesiredIndex;
  /** The ClusterIPs bound to kube-ipvs0 (what makes a virtual server outside `--service-cidr` drover's). */
  readonly bound: Set<string>;
  /** True when the last full sync kept virtual servers of an incomplete source (keep.ts), which are not in `index`. */
  readonly kept: boolean;
}

/** The virtual servers still wanted among those a partial sync looks at; one in scope but not wanted is deleted. */
function wantedIn(delta: DesiredDelta): Map<string, DesiredVirtualServer> {
  const out = new Map<string, DesiredVirtualServer>();
  for (const [key, { desired }] of delta.virtualServers) if (desired) out.set(key, desired);
  return out;
}

/**
 * The withheld virtual servers (`withheld`, by key) among those a graceful
 * check looked at (`vsKeys`, with their `dests` as dumped) that have no
 * real server left once the check's deletes are applied.
 */
function withheldEmptied(
  vsKeys: ReadonlyMap<string, VirtualServerKey>,
  dests: ReadonlyMap<string, readonly { readonly address: string; readonly port: number }[]>,
  check: { readonly deletes: readonly PendingRemoval[] },
  withheld: (key: string) => boolean,
): VirtualServerKey[] {
  const deleted = new Set(check.deletes.map((p) => `${virtualServerKey(p.vs)} ${p.rs.address}:${p.rs.port}`));
  const out: VirtualServerKey[] = [];
  for (const [key, vs] of vsKeys) {
    if (!withheld(key)) continue;
    if ((dests.get(key) ?? []).every((d) => deleted.has(`${key} ${d.address}:${d.port}`))) out.push(vs);
  }
  return out;
}

/** Run `fn` over `items`, at most `size` at a time. */
async function inBatches<T>(items: readonly T[], size: number, fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}
