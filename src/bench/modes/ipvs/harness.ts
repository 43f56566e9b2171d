/**
 * IPVS mode for `drover bench`: drover's IpvsBackend; a read-back of the
 * virtual servers with their real servers (all of them, or only the changed
 * one) and of kube-ipvs0's addresses; and three baselines:
 *
 * - raw: the minimal change (payloads.ts minimalIpvsChange);
 * - kube-proxy-style: what kube-proxy's IPVS proxier does on every sync
 *   (pkg/proxy/ipvs/proxier.go syncProxyRules, which has no partial sync):
 *   it reads and rewrites its ipsets, rewrites its iptables rules with one
 *   `iptables-restore --noflush`, lists kube-ipvs0's addresses and binds
 *   every ClusterIP again (EnsureAddressBind), and for every service reads
 *   the virtual server (syncService: GetVirtualServer) and its real servers
 *   (syncEndpoint: GetRealServers), plus one dump of all virtual servers
 *   for stale ones, then sends the commands that differ. It is a lower
 *   bound of kube-proxy's cost, which favours the baseline: the reads are
 *   pipelined (kube-proxy makes them one at a time), the set entries go in
 *   one `ipset restore` (kube-proxy lists each set and runs `ipset add` per
 *   entry), kube-proxy's per-sync `iptables-save` and chain checks are left
 *   out, and the desired state is computed off the clock;
 * - full re-render: the whole state sent again (wholeIpvsState).
 *
 * IPVS and rtnetlink sockets act on the namespace of their process: the
 * harness must be created in the node namespace (worker.ts does).
 */
import { IpvsBackend } from '../../../modes/ipvs/backend.ts';
import { assembleDesired } from '../../../modes/ipvs/assemble.ts';
import { cidrContains } from '../../../model/addr.ts';
import { desiredServicePort, virtualServerKey, type DesiredServicePort, type DesiredVirtualServer } from '../../../modes/ipvs/desired.ts';
import { parseIpsetSave, planIpsetRestore } from '../../../modes/ipvs/ipset.ts';
import type { IpsetExec } from '../../../kernel/ipset/ipset.ts';
import { applyOps, readSomeVirtualServers, readVirtualServers, type IpvsKernel } from '../../../modes/ipvs/kernel.ts';
import { DUMMY_INTERFACE, planAddresses, type LinkManager } from '../../../kernel/rtnetlink/link.ts';
import { planIpvs, sameDest, sameService, type KernelVirtualServer } from '../../../modes/ipvs/reconcile.ts';
import { ipvsStaticRules } from '../../../modes/ipvs/rules.ts';
import type { Sysctls } from '../../../modes/ipvs/sysctl.ts';
import type { IptablesExec } from '../../../kernel/iptables/exec.ts';
import type { RenderOptions } from '../../../config/render.ts';
import type { ServicePort, Snapshot } from '../../../model/types.ts';
import { silentLogger } from '../../../util/log.ts';
import { countOf } from '../../../proxier/backend.ts';
import type { BenchChange, ServiceChange } from '../../changes.ts';
import type { Baseline, ModeHarness } from '../../harness.ts';
import { kubeProxyPayload } from '../iptables/payloads.ts';
import { concatChanges, minimalIpvsChange, wholeIpvsState, type IpvsChange } from './payloads.ts';
import { ipvsDetail } from '../../../modes/ipvs/sync-detail.ts';

/** The I/O of IPVS mode, all acting on the namespace of the process. */
export interface IpvsHarnessIO {
  readonly ipvs: IpvsKernel;
  readonly ipset: IpsetExec;
  readonly iptables: IptablesExec;
  readonly links: LinkManager;
  readonly sysctls: Sysctls;
  /** Close sockets (the netlink client and rtnetlink socket). */
  close(): void;
}

/** Options of {@link ipvsHarness}. */
export interface IpvsHarnessOptions {
  /** The iptables variant drover's IPVS-mode rules are written with, for reports: `nft` or `legacy`. */
  readonly iptablesVariant: string;
  readonly render: RenderOptions;
  /** `--ipvs-scheduler` (default "rr"). */
  readonly scheduler?: string;
  /** `--service-cidr`, which must hold every ClusterIP (default 10.96.0.0/12). */
  readonly serviceCIDR?: string;
  /** `--ipvs-graceful-period`, ms (default 900 000: long enough that no pending real server is deleted during a run). */
  readonly gracefulPeriodMs?: number;
}

/** A read-back of IPVS mode's kernel state. */
export interface IpvsReadBack {
  /** Virtual servers by virtualServerKey, with their real servers. */
  readonly servers: ReadonlyMap<string, KernelVirtualServer>;
  /** Addresses bound to kube-ipvs0 (dotted quads); read for a whole read-back and for a service added or removed, else empty. */
  readonly addresses: ReadonlySet<string>;
}

/**
 * True when `state` holds `want` exactly: the virtual server as wanted, its
 * real servers with their weights, no other real server taking new
 * connections, and (when `withAddress`) its ClusterIP on kube-ipvs0.
 */
function holds(state: IpvsReadBack, want: DesiredVirtualServer, withAddress: boolean): boolean {
  const have = state.servers.get(want.key);
  if (!have || !sameService(want.vs, have.entry) || (withAddress && !state.addresses.has(want.vs.address))) return false;
  const dests = new Map(have.dests.map((d) => [`${d.address}:${d.port}`, d]));
  for (const [key, rs] of want.reals) {
    const d = dests.get(key);
    if (!d || !sameDest(rs, d)) return false;
    dests.delete(key);
  }
  // A real server still there with weight 0 is quiesced: it takes no new connection.
  return [...dests.values()].every((d) => d.weight === 0);
}

/** IPVS mode's harness; see the module comment. The backend's own timers are off (graceful checks run on syncs only). */
export function ipvsHarness(io: IpvsHarnessIO, opts: IpvsHarnessOptions): ModeHarness<IpvsReadBack> & { readonly backend: IpvsBackend } {
  const scheduler = opts.scheduler ?? 'rr';
  const serviceCIDR = opts.serviceCIDR ?? '10.96.0.0/12';
  const gracefulPeriodMs = opts.gracefulPeriodMs ?? 900_000;
  const backend = new IpvsBackend({
    ipvs: io.ipvs,
    ipset: io.ipset,
    iptables: io.iptables,
    links: io.links,
    sysctls: io.sysctls,
    render: opts.render,
    scheduler,
    serviceCIDR,
    gracefulPeriodMs,
    gracefulCheckIntervalMs: 0,
    logger: silentLogger(),
  });
  const statics = ipvsStaticRules(opts.render);
  const cache = new WeakMap<ServicePort, DesiredServicePort>();
  const desired = (sp: ServicePort): DesiredServicePort => {
    let d = cache.get(sp);
    if (!d) cache.set(sp, (d = desiredServicePort(sp, { scheduler })));
    return d;
  };
  const maybe = (sp: ServicePort | undefined): DesiredServicePort | undefined => (sp ? desired(sp) : undefined);
  /** The KUBE-LOOP-BACK entries of every service port of `c.to` but the changed one (which a minimal change must not delete). */
  const othersEntries = (c: BenchChange): Set<string> =>
    new Set([...c.to.services.values()].filter((sp) => sp.key !== c.key).flatMap((sp) => desired(sp).loopBackEntries));
  // kube-ipvs0's index, looked up once it exists (drover's backend also keeps it), so that no baseline pays a link dump on its clock.
  let knownIndex: number | undefined;
  const linkIndex = async (): Promise<number | undefined> => (knownIndex ??= await io.links.find(DUMMY_INTERFACE));

  /** Send one IpvsChange in drover's order: sets, addresses bound, IPVS commands, addresses unbound. */
  const send = async (c: IpvsChange): Promise<void> => {
    if (c.ipset !== '') await io.ipset.restore(c.ipset);
    const index = c.bind.length + c.unbind.length > 0 ? await linkIndex() : undefined;
    if (index === undefined && c.bind.length + c.unbind.length > 0) throw new Error(`${DUMMY_INTERFACE} is missing`);
    for (const a of c.bind) await io.links.addAddress(index!, a);
    await applyOps(io.ipvs, c.ops);
    for (const a of c.unbind) await io.links.delAddress(index!, { address: a, prefixLength: 32 });
  };
  const simple = (method: Baseline['method'], build: (c: BenchChange) => IpvsChange): Baseline => ({
    method,
    prepare(change) {
      const c = build(change);
      return { bytes: Buffer.byteLength(c.ipset), apply: () => send(c) };
    },
  });

  const kubeProxy: Baseline = {
    method: 'kube-proxy',
    prepare(change) {
      const ports = [...change.to.services.values()].map(desired);
      const state = assembleDesired(ports);
      const rules = kubeProxyPayload(statics, [], undefined, undefined);
      const wantedSets = state.sets;
      const owned = (vs: { address: string }): boolean => cidrContains(serviceCIDR, vs.address);
      return {
        bytes: Buffer.byteLength(rules),
        async apply() {
          const sets = planIpsetRestore(wantedSets, parseIpsetSave(await io.ipset.save()));
          if (sets.input !== '') await io.ipset.restore(sets.input);
          await io.iptables.restore(rules);
          const index = await linkIndex();
          if (index === undefined) throw new Error(`${DUMMY_INTERFACE} is missing`);
          const addresses = planAddresses(state.addresses, await io.links.addresses(index));
          for (const a of state.addresses) await io.links.addAddress(index, a);
          const all = await io.ipvs.dumpServices();
          const read = await readSomeVirtualServers(io.ipvs, [...state.virtualServers.values()].map((s) => s.vs));
          const kernel = new Map(read.state);
          for (const e of all.entries) {
            const key = virtualServerKey(e);
            if (!kernel.has(key) && owned(e)) kernel.set(key, { entry: e, dests: [] });
          }
          const plan = planIpvs(state.virtualServers, kernel, { owned, pending: new Map(), now: Date.now(), gracefulPeriodMs });
          await applyOps(io.ipvs, plan.ops);
          for (const a of addresses.remove) await io.links.delAddress(index, a);
        },
      };
    },
  };

  return {
    mode: 'ipvs',
    variant: opts.iptablesVariant,
    backend,
    // IPVS's generic netlink family announces no changes.
    kernelNotifications: false,
    async readBack(focus?: ServiceChange): Promise<IpvsReadBack> {
      // kube-ipvs0 holds every ClusterIP: read it only when the change adds or removes one.
      const index = !focus || !focus.before || !focus.after ? await linkIndex() : undefined;
      const addresses = new Set(index === undefined ? [] : (await io.links.addresses(index)).map((a) => a.address));
      if (!focus) return { servers: (await readVirtualServers(io.ipvs, () => true)).state, addresses };
      const servers = new Map([focus.before, focus.after].flatMap((sp) => (sp ? [[desired(sp).server.key, desired(sp).server.vs] as const] : [])));
      const keys = [...servers.values()];
      return { servers: (await readSomeVirtualServers(io.ipvs, keys)).state, addresses };
    },
    shows(state, change) {
      const after = maybe(change.after);
      const before = maybe(change.before);
      if (after) return holds(state, after.server, !before);
      return !before || (!state.servers.has(before.server.key) && !state.addresses.has(before.server.vs.address));
    },
    showsAll: (state: IpvsReadBack, snapshot: Snapshot) => [...snapshot.services.values()].every((sp) => holds(state, desired(sp).server, true)),
    wroteNothing: (r) => {
      const detail = ipvsDetail(r);
      const ops = detail ? Object.values(detail.ops).reduce((a, b) => a + b, 0) : 1;
      return r.bytes === 0 && ops === 0 && countOf(r.written, 'address') + countOf(r.deleted, 'address') === 0;
    },
    close() {
      backend.close();
      io.close();
    },
    raw: simple('raw', (c) => minimalIpvsChange(maybe(c.before), maybe(c.after), othersEntries(c))),
    perChange: [kubeProxy],
    whole: simple('full-rerender', (c) => {
      const others = [...c.to.services.values()].filter((sp) => sp.key !== c.key).map(desired);
      return concatChanges(wholeIpvsState(others), minimalIpvsChange(maybe(c.before), maybe(c.after), othersEntries(c)));
    }),
  };
}
