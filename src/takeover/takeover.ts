/**
 * `drover takeover --mode M`: move a node's proxy state to mode M with
 * traffic running. In order (the issue's steps): refuse while kube-proxy
 * runs (kube-proxy.ts); survey what the namespace holds (survey.ts) and
 * print the plan (plan.ts), which is all a dry run does; program mode M
 * with one full sync beside the old state (the caller's `program`); check
 * that every frontend of the desired state goes to the same endpoints
 * through the old state as through M's (verify.ts), and stop before
 * removing anything when one does not; let an old mode whose own state
 * carries connections wait for them to end, within a bound (IPVS mode:
 * ModeDriver.drain); remove the old state with the old mode's own cleanup
 * (only what that mode owns); survey again and report.
 * Connections already established keep their conntrack entries, whose NAT
 * does not depend on the rules that made it (IPVS's connections excepted:
 * hence the drain); new ones find M's rules in place before the old ones
 * go, so none meets an empty node.
 */
import { TakeoverRefusedError } from '../errors.ts';
import { DEFAULT_DRAIN_MS } from './defaults.ts';
import { localAddressesOnLink } from '../kernel/iptables/live.ts';
import { DUMMY_INTERFACE } from '../kernel/rtnetlink/link.ts';
import type { TraceContext } from '../inspect/trace.ts';
import type { BackendConfig, DrainReport, ModeOptions } from '../modes/driver.ts';
import type { ProxyConfig } from '../config/proxy-config.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import { modeDriver } from '../modes/registry.ts';
import type { IPFamily, Snapshot } from '../model/types.ts';
import { runCommand } from '../kernel/exec.ts';
import type { CleanupResult, ObjectCounts, SyncResult } from '../proxier/backend.ts';
import type { Logger } from '../util/log.ts';
import { kubeProxyAlive } from './kube-proxy.ts';
import { formatPlan, formatSurvey, planTakeover, type TakeoverPlan } from './plan.ts';
import { NFT } from '../modes/nftables/exec.ts';
import { surveyNode } from './survey.ts';
import { compareFrontends, formatDifferences, frontendsToCheck, type CheckedFrontend } from './verify.ts';
import { kubeProxyTraceContexts } from './kube-proxy-nftables.ts';

/**
 * The part of the configuration a takeover reads: the kernel section, whose
 * `mode` is the mode to move to, and the render section's service CIDR,
 * which the old modes' survey and cleanup read (default: IPVS mode's).
 */
export type TakeoverConfig = Pick<ProxyConfig, 'kernel'> & { readonly render?: Partial<Pick<RenderCliOptions, 'serviceCidr'>> };

/** What {@link takeover} needs. */
export interface TakeoverInput {
  readonly config: TakeoverConfig;
  /** The desired state, read whole from the source. */
  readonly snapshot: Snapshot;
  /** Delete kube-proxy's nftables tables, which cannot be checked. */
  readonly force: boolean;
  /** Print the survey and the plan, change nothing. */
  readonly dryRun: boolean;
  /** One full sync of `snapshot` in the target mode (the command's backend). */
  readonly program: () => Promise<SyncResult>;
  readonly logger: Logger;
  /** Where the survey, the plan and the report go (stdout). */
  readonly write: (text: string) => void;
  /** The clock, ms; default Date.now. */
  readonly now?: () => number;
  /** How long an old mode may wait for its own connections to end before its cleanup (ModeDriver.drain), ms; default {@link DEFAULT_DRAIN_MS}. */
  readonly drainMs?: number;
}


/** What {@link takeover} did. */
export interface TakeoverReport {
  readonly plan: TakeoverPlan;
  /** Frontends checked (connections walked through both states). */
  readonly checked: number;
  /** Each old mode's cleanup, in the plan's order. */
  readonly removed: ReadonlyArray<{ readonly mode: string; readonly result: CleanupResult }>;
  /** Each old mode's wait for its own connections (modes with ModeDriver.drain only). */
  readonly drained: ReadonlyArray<{ readonly mode: string; readonly report: DrainReport }>;
  /** What the survey after the removal still finds of the old modes, one line each; empty when all is gone. */
  readonly remaining: readonly string[];
  /** From the start of the full sync until the old state was gone, ms; 0 for a dry run. */
  readonly ms: number;
}

/** Plural names of the object kinds of a cleanup (proxier/backend.ts ObjectKind). */
const KIND_NAMES: Readonly<Record<string, readonly [string, string]>> = {
  chain: ['chain', 'chains'],
  rule: ['hook rule', 'hook rules'],
  'virtual server': ['virtual server', 'virtual servers'],
  'real server': ['real server', 'real servers'],
  'set entry': ['set entry', 'set entries'],
  set: ['set', 'sets'],
  address: ['address', 'addresses'],
  link: ['link', 'links'],
};

/** "23 chains, 6 hook rules": the non-zero counts of `counts`; "nothing" when all are 0. Pure. */
export function countsText(counts: ObjectCounts): string {
  const parts = Object.entries(counts)
    .filter(([, n]) => (n ?? 0) > 0)
    .map(([kind, n]) => `${n} ${(KIND_NAMES[kind] ?? [kind, kind])[n === 1 ? 0 : 1]}`);
  return parts.length > 0 ? parts.join(', ') : 'nothing';
}

/**
 * The line of an old mode's wait for its own connections: "IPVS mode's 8
 * established connections ended in 2100 ms", or how many are cut. Pure.
 */
export function drainText(title: string, r: DrainReport): string {
  if (r.connections === 0) return `${title} mode held no established connection of its own\n`;
  if (r.left === 0) return `${title} mode's ${r.connections} established connections ended in ${r.ms} ms\n`;
  return `${title} mode still held ${r.left} established connections after ${r.ms} ms, the bound (${r.connections} when the wait began): removing its state cuts those still open\n`;
}

/**
 * The node's addresses where NodePorts are checked: IPv4 ones but loopback,
 * and global IPv6 ones (none when they cannot be read); not those bound to
 * kube-ipvs0, which are Services' addresses (kube-proxy's IPVS mode serves
 * no NodePort there, and the link goes with IPVS mode's state).
 */
async function nodeIPs(netns: string | undefined): Promise<Record<IPFamily, string[]>> {
  // One `ip` per family: its addresses, and those on kube-ipvs0 (none without the link).
  const none = { all: new Set<string>(), onLink: new Set<string>() };
  const [four, six] = await Promise.all([localAddressesOnLink(netns, 'IPv4', DUMMY_INTERFACE), localAddressesOnLink(netns, 'IPv6', DUMMY_INTERFACE).catch(() => none)]);
  const v4 = [...four.all].filter((a) => !a.startsWith('127.') && !four.onLink.has(a));
  const v6 = [...six.all].filter((a) => !six.onLink.has(a));
  return { IPv4: v4, IPv6: v6 };
}

/** Mode `mode`'s trace contexts over the live kernel, for the families of `frontends` (a family it cannot read: absent). */
async function traceContexts(mode: string, opts: ModeOptions, frontends: readonly CheckedFrontend[]): Promise<Partial<Record<IPFamily, TraceContext>>> {
  const out: Partial<Record<IPFamily, TraceContext>> = {};
  for (const family of new Set(frontends.map((f) => f.family))) {
    try {
      out[family] = (await modeDriver(mode).trace({ ...opts, mode, family })).ctx;
    } catch (err) {
      if (family === 'IPv4') throw err;
    }
  }
  return out;
}

/** The kernel options of `config` for mode `mode`'s trace and survey. */
function kernelOf(config: TakeoverConfig, mode: string): ModeOptions {
  return { ...config.kernel, mode };
}

/**
 * The render settings of another mode's cleanup (and of the survey, which
 * finds what the cleanup would remove): only the service CIDR, which tells
 * which virtual servers are IPVS mode's (modes/ipvs/owned.ts).
 */
function cleanupRender(config: TakeoverConfig): BackendConfig['render'] {
  const cidr = config.render?.serviceCidr;
  return cidr !== undefined ? { serviceCidr: cidr } : {};
}

/** The backend configuration of another mode's cleanup (and drain): its kernel options, the service CIDR, and no section of any mode (none of the target mode's own flags). */
function cleanupConfig(config: TakeoverConfig, mode: string): BackendConfig {
  return { kernel: kernelOf(config, mode), render: cleanupRender(config), modes: {} };
}

/**
 * Steps 1 and 2 of a takeover to mode `config.kernel.mode`: refuse while
 * kube-proxy runs, survey the namespace, and write the survey and the plan
 * to `write`. Changes nothing.
 * @throws TakeoverRefusedError when kube-proxy runs or the plan is refused (one line).
 */
export async function prepareTakeover(config: TakeoverConfig, force: boolean, write: (text: string) => void): Promise<TakeoverPlan> {
  const { kernel } = config;
  const alive = await kubeProxyAlive(kernel.netns);
  if (alive !== undefined) throw new TakeoverRefusedError(`${alive}; nothing was changed`);
  const survey = await surveyNode(kernelOf(config, kernel.mode), cleanupRender(config));
  const plan = planTakeover(survey, modeDriver(kernel.mode).name, force);
  write(formatSurvey(survey) + formatPlan(plan, (m) => modeDriver(m).title));
  if (plan.refusal !== undefined) throw new TakeoverRefusedError(plan.refusal);
  return plan;
}

/** What {@link completeTakeover} needs: the plan, and the desired state mode `config.kernel.mode` now holds. */
export interface CompleteInput {
  readonly config: TakeoverConfig;
  readonly plan: TakeoverPlan;
  /** The snapshot the full sync of the target mode programmed, read whole. */
  readonly snapshot: Snapshot;
  readonly logger: Logger;
  readonly write: (text: string) => void;
  /** When the target mode's full sync started (ms, on `now`'s clock). */
  readonly start: number;
  readonly now?: () => number;
  /** As {@link TakeoverInput.drainMs}. */
  readonly drainMs?: number;
}

/**
 * Steps 4 to 6, once mode `config.kernel.mode` holds `snapshot`: check every
 * frontend, remove the old state, survey again and report (see the
 * module comment).
 * @throws TakeoverRefusedError, before anything is removed, naming each
 *   frontend that differs with both sets of endpoints; whatever a trace
 *   read or a cleanup throws (a cleanup that fails leaves the new mode
 *   programmed beside the rest).
 */
export async function completeTakeover(input: CompleteInput): Promise<TakeoverReport> {
  const { config, plan, write } = input;
  const { netns } = config.kernel;
  const now = input.now ?? Date.now;
  const target = modeDriver(config.kernel.mode);
  let checked = 0;
  if (plan.remove.length > 0 || plan.checkTables.length > 0) {
    const frontends = frontendsToCheck(input.snapshot, await nodeIPs(netns));
    const families = frontends.map((f) => f.family);
    const current = await traceContexts(target.name, kernelOf(config, target.name), frontends);
    const olds = [
      ...plan.remove.map((m) => ({ title: `${m.title} mode`, contexts: () => traceContexts(m.mode, kernelOf(config, m.mode), frontends) })),
      ...(plan.checkTables.length > 0 ? [{ title: "kube-proxy's nftables mode", contexts: () => kubeProxyTraceContexts(netns, families, plan.checkTables) }] : []),
    ];
    for (const old of olds) {
      const diffs = compareFrontends(frontends, await old.contexts(), current);
      if (diffs.length > 0) {
        throw new TakeoverRefusedError(
          `${diffs.length} of ${frontends.length} frontends go elsewhere in ${old.title} than in ${target.title} mode; nothing was removed (both are programmed now):\n` +
            formatDifferences(old.title, `${target.title} mode`, diffs).trimEnd(),
        );
      }
    }
    checked = frontends.length;
    write(`checked ${checked} frontends: the same endpoints in ${[...olds.map((o) => o.title), `${target.title} mode`].join(' and ')}\n`);
  }

  const drained: Array<{ mode: string; report: DrainReport }> = [];
  for (const old of plan.remove) {
    const driver = modeDriver(old.mode);
    if (driver.drain === undefined) continue;
    const report = await driver.drain(cleanupConfig(config, old.mode), input.drainMs ?? DEFAULT_DRAIN_MS);
    drained.push({ mode: old.mode, report });
    write(drainText(driver.title, report));
  }

  const removed = [];
  for (const old of plan.remove) {
    const driver = modeDriver(old.mode);
    const backend = await driver.createBackend(cleanupConfig(config, old.mode), { masqueradeAll: false }, input.logger);
    try {
      const result = await backend.cleanup();
      removed.push({ mode: old.mode, result });
      write(`removed ${driver.title} mode: ${countsText(result.removed)}${result.kept.length > 0 ? `; kept ${result.kept.map((k) => `${k.table} ${k.chain}`).join(', ')} (another rule jumps to it)` : ''}\n`);
    } finally {
      await backend.close?.();
    }
  }
  for (const table of [...plan.checkTables, ...plan.deleteTables]) {
    const res = await runCommand(NFT, ['delete', 'table', ...table.split(' ')], netns !== undefined ? { netns } : {});
    if (res.code !== 0) throw new Error(`nft delete table ${table} failed: ${res.stderr.trim()}`);
    write(`removed table ${table}${plan.deleteTables.includes(table) ? ' (unchecked: --force)' : ''}\n`);
  }
  const ms = now() - input.start;

  const after = await surveyNode(kernelOf(config, target.name), cleanupRender(config));
  const remaining = [
    ...after.modes.filter((m) => plan.remove.some((r) => r.mode === m.mode) && m.found.length > 0).map((m) => `${m.title} mode: ${m.found.join('; ')}`),
    ...after.kubeProxyTables.filter((t) => plan.checkTables.includes(t) || plan.deleteTables.includes(t)).map((t) => `table ${t}`),
  ];
  write(remaining.length === 0 ? `done in ${ms} ms: only ${target.title} mode's state is left\n` : `done in ${ms} ms, but still there: ${remaining.join('; ')}\n`);
  return { plan, checked, removed, drained, remaining, ms };
}

/**
 * Move the namespace of `input.config.kernel.netns` to mode `input.config.kernel.mode`, as
 * the module comment says: {@link prepareTakeover}, then (unless a dry
 * run) `input.program`, then {@link completeTakeover}. The survey, the plan
 * and the report are written to `input.write` as they come.
 * @throws as prepareTakeover and completeTakeover; whatever the sync throws.
 */
export async function takeover(input: TakeoverInput): Promise<TakeoverReport> {
  const { config, write } = input;
  const now = input.now ?? Date.now;
  const plan = await prepareTakeover(config, input.force, write);
  if (input.dryRun) {
    write('dry run: nothing was changed\n');
    return { plan, checked: 0, removed: [], drained: [], remaining: [], ms: 0 };
  }
  const start = now();
  const synced = await input.program();
  write(`synced ${modeDriver(config.kernel.mode).title} mode: ${synced.services} service ports, ${synced.endpoints} endpoints, in ${synced.totalMs.toFixed(1)} ms\n`);
  return completeTakeover({ config, plan, snapshot: input.snapshot, logger: input.logger, write, start, now, ...(input.drainMs !== undefined ? { drainMs: input.drainMs } : {}) });
}
