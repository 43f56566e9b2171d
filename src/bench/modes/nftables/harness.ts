/**
 * nftables mode for `drover bench`: drover's NftablesBackend with the
 * nf_tables netlink element writer (netlink-writer.ts); a read-back with
 * `nft -j list table ip drover`, checked with the planner itself (a change
 * shows when planning its frontends against the read-back writes nothing,
 * plan.ts planFrontend; the whole state when a full sync would write no
 * element and a partial one no structure, backend.ts planFullSync); and
 * four baselines
 * (payloads.ts, kube-proxy.ts):
 *
 * - raw: the change's element operations (minimalNftOps) as one netlink
 *   batch, one kernel transaction: the physical limit;
 * - minimal script: the same operations as one `nft -f` script;
 * - kube-proxy-style: kube-proxy's layout and partial-sync transaction
 *   through `nft -f`, on a table `ip kube-proxy` of the same services
 *   written by {@link ModeHarness.setUp};
 * - full re-render: drover's whole table deleted and written again by one
 *   `nft -f` transaction.
 *
 * The netlink socket acts on the namespace of its process: the harness
 * must be created in the node namespace (worker.ts does).
 */
import type { ServicePort, Snapshot } from '../../../model/types.ts';
import { silentLogger } from '../../../util/log.ts';
import { countOf } from '../../../proxier/backend.ts';
import type { RenderOptions } from '../../../config/render.ts';
import type { BenchChange, ServiceChange } from '../../changes.ts';
import type { Baseline, ModeHarness } from '../../harness.ts';
import { NftablesBackend, planFullSync } from '../../../modes/nftables/backend.ts';
import { kpService, kubeProxyChange, kubeProxyTableScript, type KpService } from './kube-proxy.ts';
import { minimalNftOps, wholeTableScript } from './payloads.ts';
import { desiredFrontends, type DesiredFrontend } from '../../../modes/nftables/desired.ts';
import type { NftExec } from '../../../modes/nftables/exec.ts';
import { HAIRPIN, TABLE } from '../../../modes/nftables/layout.ts';
import type { LiveTable } from '../../../modes/nftables/live.ts';
import { TableModel, type ElementOp } from '../../../modes/nftables/model.ts';
import { batchBytes, elementChanges, NetlinkElementWriter, type NetlinkElementClient } from '../../../modes/nftables/netlink-writer.ts';
import { planFrontend } from '../../../modes/nftables/plan.ts';
import { elementLines } from '../../../modes/nftables/script.ts';

/** The I/O of nftables mode, acting on the namespace of the process. */
export interface NftHarnessIO {
  /** nft(8) (exec.ts SystemNft without a namespace, or a fake). */
  readonly nft: NftExec;
  /** The nf_tables netlink client drover's element writer and the raw baseline commit through. */
  readonly netlink: NetlinkElementClient;
  /** Close the netlink socket. */
  close(): void;
}

/** Options of {@link nftablesHarness}. */
export interface NftHarnessOptions {
  readonly render: RenderOptions;
  /** This node's NodePort addresses (node-ports.ts nftNodePortIPs), as drover run reads them. */
  readonly nodePortIPs: readonly string[];
}

/** True when the table `model` holds the frontends of `change.after` exactly and none of `change.before`'s that `after` lacks. */
function holdsChange(model: TableModel, before: readonly DesiredFrontend[], after: readonly DesiredFrontend[]): boolean {
  const want = new Map(after.map((f) => [f.frontend, f] as const));
  const ops: ElementOp[] = [];
  for (const text of new Set([...before.map((f) => f.frontend), ...want.keys()])) planFrontend(model, text, want.get(text), ops);
  return ops.length === 0 && after.every((f) => f.hairpin.every((e) => model.has(HAIRPIN, e)));
}

/** nftables mode's harness; see the module comment. */
export function nftablesHarness(io: NftHarnessIO, opts: NftHarnessOptions): ModeHarness<LiveTable> & { readonly backend: NftablesBackend } {
  const frontendOpts = { nodePortIPs: opts.nodePortIPs };
  const backend = new NftablesBackend({ nft: io.nft, elements: new NetlinkElementWriter(io.netlink), render: opts.render, frontends: frontendOpts, logger: silentLogger() });
  const cidr = opts.render.clusterCIDR ?? '0.0.0.0/0';
  const cache = new WeakMap<ServicePort, readonly DesiredFrontend[]>();
  const frontends = (sp: ServicePort | undefined): readonly DesiredFrontend[] => {
    if (!sp) return [];
    let f = cache.get(sp);
    if (!f) cache.set(sp, (f = desiredFrontends(sp, undefined, frontendOpts)));
    return f;
  };
  /** The hairpin entries of every service port of `c.to` but the changed one (which a minimal change must leave alone). */
  const othersHairpin = (c: BenchChange): Set<string> =>
    new Set([...c.to.services.values()].filter((sp) => sp.key !== c.key).flatMap((sp) => frontends(sp).flatMap((f) => f.hairpin)));
  const minimal = (c: BenchChange): ElementOp[] => minimalNftOps(frontends(c.before), frontends(c.after), othersHairpin(c));
  const script = (method: Baseline['method'], build: (c: BenchChange) => string): Baseline => ({
    method,
    prepare(change) {
      const text = build(change);
      return { bytes: Buffer.byteLength(text), apply: () => (text === '' ? Promise.resolve() : io.nft.run(text)) };
    },
  });

  const kpCache = new WeakMap<ServicePort, KpService>();
  const kp = (sp: ServicePort | undefined): KpService | undefined => {
    if (!sp) return undefined;
    let s = kpCache.get(sp);
    if (!s) kpCache.set(sp, (s = kpService(sp)));
    return s;
  };
  /** Chains kube-proxy's last transaction flushed and left for the next one to delete. */
  let stale: readonly string[] = [];
  const kubeProxy: Baseline = {
    method: 'kube-proxy',
    prepare(change) {
      const c = kubeProxyChange(kp(change.before), kp(change.after), stale, cidr);
      return {
        bytes: Buffer.byteLength(c.script),
        async apply() {
          if (c.script !== '') await io.nft.run(c.script);
          stale = c.stale;
        },
      };
    },
  };

  return {
    mode: 'nftables',
    variant: 'netlink',
    backend,
    kernelNotifications: true,
    // The whole table: every set the change touches holds every service's elements, the slot map most of them.
    readBack: (_focus?: ServiceChange) => io.nft.list(),
    shows: (state, change) => holdsChange(TableModel.fromLive(state), frontends(change.before), frontends(change.after)),
    showsAll(state, snapshot) {
      // Every element as a full sync wants it; and the structure as a partial sync leaves it, which keeps the sets and rules of endpoint counts no longer in use.
      const model = TableModel.fromLive(state);
      if (planFullSync(model, snapshot, opts.render, frontendOpts, false).ops.length > 0) return false;
      const s = planFullSync(model, snapshot, opts.render, frontendOpts, true).structure;
      return !s.rebuild && s.addSets.length === 0 && s.writeChains.length === 0;
    },
    // No element written or deleted and no set missing. Deleting the sets of endpoint counts no longer in use (and
    // rewriting the chain that looked them up) is a full sync's clean-up of what partial syncs keep, not a repair.
    wroteNothing: (r) => countOf(r.written, 'set entry') + countOf(r.deleted, 'set entry') + countOf(r.written, 'set') === 0,
    close: () => io.close(),
    async setUp(base: Snapshot) {
      stale = [];
      await io.nft.run(kubeProxyTableScript([...base.services.values()].map((sp) => kp(sp)!), cidr));
    },
    raw: {
      method: 'raw',
      prepare(change) {
        const changes = elementChanges(minimal(change));
        return { bytes: batchBytes(changes), apply: async () => void (changes.length > 0 && (await io.netlink.commit(changes))) };
      },
    },
    perChange: [script('minimal-script', (c) => {
      const ops = minimal(c);
      return ops.length === 0 ? '' : `${elementLines(ops).join('\n')}\n`;
    }), kubeProxy],
    whole: script('full-rerender', (c) => wholeTableScript(c.to, opts.render, frontendOpts)),
    fromEmpty: {
      prepare(snapshot) {
        const text = wholeTableScript(snapshot, opts.render, frontendOpts, false);
        return { bytes: Buffer.byteLength(text), apply: () => io.nft.run(text) };
      },
      clear: () => io.nft.run(`delete table ${TABLE.family} ${TABLE.name}\n`),
    },
  };
}
