/**
 * NodePorts on 127.0.0.1 in iptables mode (`--nodeport-localhost`), as
 * kube-proxy's IPv4 iptables proxier has them with
 * `--iptables-localhost-nodeports` (pkg/proxy/iptables/proxier.go,
 * NewProxier and syncProxyRules):
 *
 * - only when `--nodeport-addresses` is empty, 0.0.0.0/0, or has an IPv4
 *   CIDR that overlaps 127.0.0.0/8 (kube-proxy's ContainsIPv4Loopback);
 *   otherwise the flag does nothing;
 * - the nodeports hooks then take 127.0.0.0/8 too (no `! -d 127.0.0.0/8`;
 *   with `--nodeport-addresses`, one `-d 127.0.0.1/32` hook per loopback
 *   address of the node in the CIDRs);
 * - net.ipv4.conf.all.route_localnet=1 in the namespace drover programs,
 *   without which the kernel drops a packet from 127.0.0.1 routed out of
 *   loopback (a martian); the DNATed connection is masqueraded by the
 *   service's KUBE-EXT chain (every source under externalTrafficPolicy
 *   Cluster, `--src-type LOCAL`, which 127.0.0.1 is, under Local), so the
 *   backend answers the node's address and not 127.0.0.1;
 * - filter KUBE-FIREWALL, jumped to from INPUT and OUTPUT, drops packets to
 *   127.0.0.0/8 that did not come from 127.0.0.0/8 and were not DNATed:
 *   route_localnet would otherwise let a neighbour reach services bound to
 *   127.0.0.1 (CVE-2020-8558, kubernetes issue 90259).
 *
 * IPv6 has no localhost NodePorts (route_localnet is IPv4-only, and
 * kube-proxy never serves NodePorts on ::1): the flag leaves the IPv6
 * ruleset alone.
 *
 * drover leaves the flag off by default, unlike kube-proxy's iptables mode:
 * kube-proxy's nftables mode has no localhost NodePorts, and route_localnet
 * weakens the node's loopback isolation. drover records the value
 * route_localnet had before it set it (in {@link RUN_DIR}, which lives as
 * long as the sysctl: until reboot), and puts it back at `cleanup` or when
 * it starts again without the flag, as long as the value is still the 1
 * drover wrote.
 */
import { Option } from 'commander';
import { readFile, rm, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../util/log.ts';
import { namespaceIdentity, type NamespaceIdentity } from '../../util/netns.ts';
import type { Snapshot } from '../../model/types.ts';
import type { Backend, ChangeSet, CleanupResult, SyncResult } from '../../proxier/backend.ts';
import { isErrno } from '../../kernel/netlink/errno.ts';
import { ProcSysctls, type Sysctls } from '../shared/sysctls.ts';
import { FamilySyncError } from '../shared/dual-stack.ts';
import { LOCALNET_FIREWALL_JUMP } from '../shared/kube-chains/localnet.ts';

/** The sysctl that lets the kernel route packets from and to 127.0.0.0/8 off loopback. */
export const ROUTE_LOCALNET = 'net.ipv4.conf.all.route_localnet';

/**
 * True when the `iptables-save -t filter` text `filterSave` holds drover's
 * jump to KUBE-FIREWALL: the chain is then drover's, for `cleanup`.
 */
export function hasLocalnetFirewallJump(filterSave: string): boolean {
  return filterSave.split('\n').some((line) => /^-A (INPUT|OUTPUT) /.test(line) && line.endsWith(` ${LOCALNET_FIREWALL_JUMP}`));
}

/** Where drover records the route_localnet value it replaced: a tmpfs, emptied at boot as the sysctl is reset. */
export const RUN_DIR = '/run/drover';

/** `--nodeport-localhost` (of run, sync, render and diff; iptables mode only). */
export function nodePortLocalhostOption(): Option {
  return new Option(
    '--nodeport-localhost',
    '(--mode iptables) NodePorts also on 127.0.0.1, as kube-proxy\'s --iptables-localhost-nodeports: sets net.ipv4.conf.all.route_localnet=1 in the namespace drover programs ' +
      'and adds the KUBE-FIREWALL rule that drops packets to 127.0.0.0/8 from elsewhere (CVE-2020-8558); only when --nodeport-addresses is empty or holds 127.0.0.0/8; IPv4 only (there are no localhost NodePorts for IPv6). ' +
      "Off by default, unlike kube-proxy's iptables mode: kube-proxy's nftables mode has none, and route_localnet weakens loopback's isolation",
  ).default(false);
}

/** `--no-nodeport-localhost`: no NodePorts on 127.0.0.1 even if `--config` sets `iptables.localhostNodePorts` (kube-proxy's `--iptables-localhost-nodeports=false`). */
export function noNodePortLocalhostOption(): Option {
  return new Option('--no-nodeport-localhost', '(--mode iptables) no NodePorts on 127.0.0.1, even if --config sets iptables.localhostNodePorts');
}

/** What drover records when it sets route_localnet: the value before, and the namespace it belongs to. */
export interface RouteLocalnetRecord {
  /** The `--netns` name, or null for drover's own namespace. */
  readonly netns: string | null;
  /**
   * The inode of the namespace (/run/netns/NAME or /proc/self/ns/net), so a
   * namespace made again under the same name is not taken for it; with
   * {@link dev}, its identity (the kernel's nsfs inode numbers are only
   * unique within one device, see namespaces(7)).
   */
  readonly inode: number;
  /** The st_dev of that file. */
  readonly dev: number;
  /** route_localnet before drover set it, e.g. "0". */
  readonly prior: string;
}

/**
 * The record file of namespace `netns` in `dir`; drover's own namespace
 * (undefined) has `route_localnet.@self.json`, a name no `--netns` can take
 * (cli/options.ts netnsArg has no `@`).
 */
export function recordPath(netns: string | undefined, dir = RUN_DIR): string {
  return join(dir, `route_localnet.${netns ?? '@self'}.json`);
}

/** True when `record` was written for the namespace of identity `id`. */
function sameNamespace(record: RouteLocalnetRecord, id: NamespaceIdentity | undefined): boolean {
  return id !== undefined && record.inode === id.inode && record.dev === id.dev;
}

async function readRecord(netns: string | undefined, dir: string): Promise<RouteLocalnetRecord | undefined> {
  try {
    const parsed = JSON.parse(await readFile(recordPath(netns, dir), 'utf8')) as RouteLocalnetRecord;
    return typeof parsed.prior === 'string' && /^[0-9]+$/.test(parsed.prior) && typeof parsed.inode === 'number' && typeof parsed.dev === 'number' ? parsed : undefined;
  } catch (err) {
    if (isErrno(err, 'ENOENT') || err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/** Where route_localnet lives and its record is kept. */
export interface RouteLocalnetPlace {
  /** The `--netns` drover programs; undefined: its own. */
  readonly netns: string | undefined;
  readonly sysctls: Sysctls;
  /** The record folder (default {@link RUN_DIR}). */
  readonly dir?: string;
}

/**
 * Set route_localnet to 1 in `place`, recording the value before when it
 * was not 1 and no record of this namespace is kept yet (a restart keeps the
 * first record; a record of an earlier namespace of the same name, one
 * deleted and made again while drover was not there to clean up, is
 * replaced: its value is not this namespace's).
 * @returns true when it wrote the sysctl.
 * @throws Error when the sysctl cannot be read or written, or the namespace file cannot be read or the record written (then the sysctl is left alone).
 */
export async function ensureRouteLocalnet(place: RouteLocalnetPlace, logger: Logger): Promise<boolean> {
  const now = await place.sysctls.read(ROUTE_LOCALNET);
  if (now === undefined) throw new Error(`sysctl ${ROUTE_LOCALNET} does not exist`);
  if (now === '1') return false;
  const dir = place.dir ?? RUN_DIR;
  const id = await namespaceIdentity(place.netns);
  const kept = await readRecord(place.netns, dir);
  if (kept === undefined || !sameNamespace(kept, id)) {
    const record: RouteLocalnetRecord = { netns: place.netns ?? null, inode: id.inode, dev: id.dev, prior: now };
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await writeFile(recordPath(place.netns, dir), `${JSON.stringify(record)}\n`, { mode: 0o644 });
  }
  await place.sysctls.write(ROUTE_LOCALNET, '1');
  logger.info({ sysctl: ROUTE_LOCALNET, was: now, netns: place.netns }, 'set route_localnet=1 for NodePorts on 127.0.0.1 (--nodeport-localhost)');
  return true;
}

/**
 * Put back the route_localnet value drover recorded for `place`, when the
 * record belongs to this namespace (same inode and st_dev) and the value is still the 1 drover
 * wrote (someone else's later change is left alone); the record is removed
 * in any case.
 * @returns the value written back, or undefined when nothing was written.
 * @throws Error when the sysctl cannot be written (the record is then kept).
 */
export async function restoreRouteLocalnet(place: RouteLocalnetPlace, logger: Logger): Promise<string | undefined> {
  const dir = place.dir ?? RUN_DIR;
  const record = await readRecord(place.netns, dir);
  if (record === undefined) return undefined;
  let id: NamespaceIdentity | undefined;
  try {
    id = await namespaceIdentity(place.netns);
  } catch {
    id = undefined;
  }
  let restored: string | undefined;
  if (sameNamespace(record, id) && (await place.sysctls.read(ROUTE_LOCALNET)) === '1' && record.prior !== '1') {
    await place.sysctls.write(ROUTE_LOCALNET, record.prior);
    restored = record.prior;
    logger.info({ sysctl: ROUTE_LOCALNET, value: record.prior, netns: place.netns }, 'route_localnet set back to its value before drover');
  }
  await rm(recordPath(place.netns, dir), { force: true });
  return restored;
}

/**
 * iptables mode's backend with route_localnet (see the module comment).
 * With localhost NodePorts on, route_localnet=1 is made sure of after every
 * successful full sync, once the anti-martian rule is in place (so a reset
 * is repaired with the rules). With them off, the first sync first puts
 * back a value drover recorded at an earlier start with the flag (the
 * KUBE-FIREWALL rule of that start then stays until `cleanup`). `cleanup`
 * puts the recorded value back before the rules go: route_localnet is never
 * on by drover's doing without the anti-martian rule. IPv4 alone carries
 * localhost NodePorts, so a sync whose IPv4 family succeeded
 * (dual-stack.ts FamilySyncError without IPv4) still makes sure of
 * route_localnet before the IPv6 failure is thrown.
 */
export class RouteLocalnetBackend implements Backend {
  readonly mode: string;
  /** Whether the first sync with localhost NodePorts off looked for a value to put back. */
  private restoredOnce = false;

  constructor(
    private readonly inner: Backend,
    private readonly place: RouteLocalnetPlace,
    private readonly on: boolean,
    private readonly logger: Logger,
  ) {
    this.mode = inner.mode;
  }

  /**
   * Sync the inner backend. With localhost NodePorts off, the first call
   * first puts back a route_localnet value recorded by an earlier start
   * ({@link restoreRouteLocalnet}); with them on, a full sync whose IPv4
   * rules (KUBE-FIREWALL included) were written is followed by
   * {@link ensureRouteLocalnet}, also when the IPv6 family failed.
   * @throws what the inner sync throws (after route_localnet was made sure
   *   of, when IPv4 succeeded), or the Error of restoreRouteLocalnet or
   *   ensureRouteLocalnet.
   */
  async sync(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult> {
    if (!this.on && !this.restoredOnce) {
      this.restoredOnce = true;
      await restoreRouteLocalnet(this.place, this.logger);
    }
    let result: SyncResult;
    try {
      result = await this.inner.sync(snapshot, changes);
    } catch (err) {
      // Only IPv6 failed: the IPv4 ruleset, anti-martian rule included, is in place, and its NodePorts need route_localnet.
      if (this.on && changes.full && err instanceof FamilySyncError && !err.failures.some((f) => f.family === 'IPv4')) await ensureRouteLocalnet(this.place, this.logger);
      throw err;
    }
    if (this.on && result.full) await ensureRouteLocalnet(this.place, this.logger);
    return result;
  }

  /**
   * With localhost NodePorts on, a route_localnet that is no longer 1 is
   * drift; otherwise the inner backend's drift check.
   * @returns the reason to sync in full, or undefined when nothing drifted.
   * @throws when the sysctl or the inner backend's state cannot be read.
   */
  async driftCheck(): Promise<string | undefined> {
    if (this.on && (await this.place.sysctls.read(ROUTE_LOCALNET)) !== '1') return `sysctl ${ROUTE_LOCALNET} is not 1`;
    return this.inner.driftCheck ? this.inner.driftCheck() : 'the backend has no drift check';
  }

  /**
   * Put back the recorded route_localnet value ({@link restoreRouteLocalnet}),
   * then clean up the inner backend: the sysctl goes back before the
   * anti-martian rule does.
   * @throws the Error of restoreRouteLocalnet (nothing is removed then), or what the inner cleanup throws.
   */
  async cleanup(): Promise<CleanupResult> {
    await restoreRouteLocalnet(this.place, this.logger);
    return this.inner.cleanup();
  }

  /** Close the inner backend (route_localnet is left as it is: it stays while the rules do). */
  async close(): Promise<void> {
    await this.inner.close?.();
  }
}
