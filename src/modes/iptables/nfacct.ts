/**
 * kube-proxy's nfacct counters in iptables mode (pkg/proxy/iptables/proxier.go
 * with pkg/proxy/metrics/metrics.go), over kernel/nfacct:
 *
 * - at start, each counter is ensured in the namespace drover programs
 *   ({@link ensureCounters}); one that cannot be created (a kernel without
 *   CONFIG_NETFILTER_NETLINK_ACCT, no CAP_NET_ADMIN) is logged once and left
 *   out, and its rule is written as it was before nfacct;
 * - {@link CT_STATE_INVALID_DROPPED}: the drop of conntrack-INVALID packets
 *   in filter KUBE-FORWARD (both families) counts what it drops,
 *   `-m conntrack --ctstate INVALID -m nfacct --nfacct-name
 *   ct_state_invalid_dropped_pkts -j DROP` ({@link withCountedInvalidDrop});
 * - {@link LOCALHOST_NODEPORTS_ACCEPTED}: with localhost NodePorts on
 *   (IPv4 only), each NodePort with endpoints gets, before its entry in nat
 *   KUBE-NODEPORTS, the same jump for destinations in 127.0.0.0/8 with
 *   `-m nfacct --nfacct-name localhost_nps_accepted_pkts` (render.ts, with
 *   RenderOptions.countLocalhostNodePorts);
 * - the metrics read the counters from the kernel when scraped (metrics.ts).
 *
 * IPVS mode has no nfacct rules (kube-proxy's IPVS proxier writes its
 * INVALID drop without them and registers no nfacct metric), nor has
 * nftables mode (its `ct state invalid drop` carries no counter).
 *
 * iptables-save prints the match back as `--nfacct-name  NAME`, with two
 * spaces (iptables extensions/libxt_nfacct.c, then xtables_save_string):
 * canonical.ts maps the rendered form to it.
 */
import type { Nfacct } from '../../kernel/nfacct/types.ts';
import { nfacctOf } from '../../kernel/nfacct/netns.ts';
import type { Logger } from '../../util/log.ts';
import { runCommand } from '../../kernel/exec.ts';
import { FORWARD_CHAIN, INVALID_DROP_RULE, type StaticRuleset } from '../shared/kube-chains/static.ts';
import { CT_STATE_INVALID_DROPPED, KUBE_PROXY_COUNTERS, nfacctMatch, type CounterSet, type KubeProxyCounter } from './nfacct-names.ts';

/** {@link INVALID_DROP_RULE} counting what it drops, as kube-proxy writes it with nfacct. */
export const COUNTED_INVALID_DROP_RULE = `-m conntrack --ctstate INVALID ${nfacctMatch(CT_STATE_INVALID_DROPPED)} -j DROP`;

/**
 * `statics` with its INVALID drop counted (in place) when `counters` holds
 * {@link CT_STATE_INVALID_DROPPED}, else `statics` itself (also when the
 * drop is left out, withInvalidDrop). Pure.
 */
export function withCountedInvalidDrop(statics: StaticRuleset, counters: CounterSet): StaticRuleset {
  if (!counters.has(CT_STATE_INVALID_DROPPED)) return statics;
  const filter = statics.chains.get('filter');
  const forward = filter?.get(FORWARD_CHAIN);
  if (filter === undefined || forward === undefined || !forward.includes(INVALID_DROP_RULE)) return statics;
  const chains = new Map(statics.chains);
  chains.set('filter', new Map([...filter, [FORWARD_CHAIN, forward.map((r) => (r === INVALID_DROP_RULE ? COUNTED_INVALID_DROP_RULE : r))]]));
  return { ...statics, chains };
}

/** The nfacct objects of namespace `netns` (undefined: drover's own). */
export function namespaceNfacct(netns: string | undefined): Nfacct {
  return nfacctOf(netns, runCommand);
}

/**
 * Ensure each of kube-proxy's counters, as kube-proxy's NewProxier does;
 * one that fails is logged (once: this runs at start) and left out.
 * @returns the counters that exist now.
 */
export async function ensureCounters(nfacct: Nfacct, logger: Logger): Promise<Set<KubeProxyCounter>> {
  const ok = new Set<KubeProxyCounter>();
  let results: Map<string, Error | undefined>;
  try {
    results = await nfacct.ensureEach(KUBE_PROXY_COUNTERS);
  } catch (err) {
    results = new Map(KUBE_PROXY_COUNTERS.map((n) => [n, err as Error]));
  }
  for (const name of KUBE_PROXY_COUNTERS) {
    const err = results.get(name);
    if (err === undefined) ok.add(name);
    else logger.warn({ counter: name, err: err.message }, 'cannot create the nfacct counter: its rule counts nothing and its metric is not served');
  }
  return ok;
}

/**
 * The counters of kube-proxy's that exist in `nfacct`'s namespace, read
 * without creating any: what `diff` and `status` compare a running drover's
 * rules with (it created them at start). An unreadable namespace has none.
 */
export async function presentCounters(nfacct: Nfacct): Promise<Set<KubeProxyCounter>> {
  try {
    const names = new Set((await nfacct.list()).map((c) => c.name));
    return new Set(KUBE_PROXY_COUNTERS.filter((n) => names.has(n)));
  } catch {
    return new Set();
  } finally {
    nfacct.close();
  }
}
