/**
 * `drover chains` in nftables mode: per frontend, what the live table
 * `ip drover` holds for it. Its chains are the same for every Service
 * (layout.ts), so what belongs to a frontend is elements: the sets that
 * hold it (service-ips, cluster-ips, endpoint-count-N, affinity-T, …), its
 * endpoint slots in each selection (maps `endpoints` and
 * `local-endpoints`) with each endpoint's hairpin entry, its ClientIP
 * affinity timeout and the affinity entries the kernel recorded, and its
 * firewall-allow ranges.
 *
 * The table keeps no service names, so a frontend is named by its service
 * port only through the desired state of `--source` (desired.ts); then
 * each view also lists what a full sync would write for it (plan.ts
 * planFrontend). Without `--source`, frontends are listed by address.
 * Pure: the state comes from live.ts.
 */
import { compareAddresses } from '../../model/addr.ts';
import { endpointPodKey } from '../../model/pods.ts';
import type { DesiredNft } from './desired.ts';
import { hairpinText, parseFrontend, parseTarget } from './elements.ts';
import { AFFINITY_MAP, FIREWALL_ALLOW, HAIRPIN, MEMBERSHIP_SETS, SELECTIONS, countSetName, timeoutOfSet, type Selection } from './layout.ts';
import type { LiveTable } from './live.ts';
import { TableModel, type ElementOp } from './model.ts';
import { firewallOf, planFrontend } from './plan.ts';
import { modelFrontends } from './backend.ts';

/** One slot of a selection: its endpoint and that endpoint's hairpin entry. */
export interface NftSlotView {
  readonly slot: number;
  /** `ip . port`; null for a hole (a slot the count covers but the map lacks). */
  readonly endpoint: string | null;
  /** Its entry of set hairpin (`ip . ip . proto . port`) and whether the table has it; null for a hole. */
  readonly hairpin: { readonly entry: string; readonly present: boolean } | null;
  /** With `--source`: the Pod ("namespace/name") the endpoint was derived from; absent otherwise. */
  readonly pod?: string;
}

/** A frontend's endpoints in one selection (layout.ts Selection). */
export interface NftSelectionView {
  readonly selection: Selection['name'];
  /** The slot map, `endpoints` or `local-endpoints`. */
  readonly map: string;
  /** The endpoint counts whose set holds the frontend (one when consistent; the pick rule of the first in rule order wins). */
  readonly counts: readonly number[];
  /** Slots 0 .. max(count, highest slot in the map) - 1. */
  readonly slots: readonly NftSlotView[];
}

/**
 * One frontend. This is the `--json` shape of `drover chains --mode
 * nftables` (an array of these).
 */
export interface NftFrontendView {
  /** ServicePortName from `--source`; null without it or for a frontend the source does not want. */
  readonly servicePort: string | null;
  /** `ip . protocol . port`, as the sets hold it. */
  readonly frontend: string;
  /** The sets of the table that hold it: its frontend sets in layout order (layout.ts MEMBERSHIP_SETS), then endpoint-count-N and affinity-T by name. */
  readonly sets: readonly string[];
  /** Its selections with slots or a count set (`main`, then `local`). */
  readonly selections: readonly NftSelectionView[];
  /** ClientIP affinity timeout in seconds (set affinity-T); null without. */
  readonly affinitySeconds: number | null;
  /** The entries of map affinity for it: client → endpoint (`ip . port`), as the kernel recorded them. */
  readonly affinityEntries: readonly { readonly client: string; readonly endpoint: string }[];
  /** Its client ranges in set firewall-allow (a /32 as a bare address). */
  readonly firewall: readonly string[];
  /** With `--source`: the element operations a full sync would write for it (empty: as desired); absent without. */
  readonly pending?: readonly ElementOp[];
}

/** The frontend sets in layout order (MEMBERSHIP_SETS), then the others by name. */
function bySetOrder(a: string, b: string): number {
  const rank = (n: string): number => {
    const i = (MEMBERSHIP_SETS as readonly string[]).indexOf(n);
    return i < 0 ? MEMBERSHIP_SETS.length : i;
  };
  return rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0);
}

function compareFrontends(a: string, b: string): number {
  const x = parseFrontend(a);
  const y = parseFrontend(b);
  return compareAddresses(x.ip, y.ip) || (x.protocol < y.protocol ? -1 : x.protocol > y.protocol ? 1 : 0) || x.port - y.port;
}

function selectionView(live: LiveTable, model: TableModel, sel: Selection, frontend: string, pods: (endpoint: string) => string | undefined): NftSelectionView | undefined {
  const counts = model.countsOf(sel, frontend).sort((a, b) => a - b);
  const slots = model.slotsOf(sel, frontend);
  if (counts.length === 0 && slots.length === 0) return undefined;
  const { protocol } = parseFrontend(frontend);
  const hairpin = live.sets.get(HAIRPIN)?.elements;
  const n = Math.max(slots.length, ...counts);
  return {
    selection: sel.name,
    map: sel.map,
    counts,
    slots: Array.from({ length: n }, (_, slot): NftSlotView => {
      const endpoint = slots[slot];
      if (endpoint === undefined) return { slot, endpoint: null, hairpin: null };
      const entry = hairpinText(protocol, parseTarget(endpoint));
      const pod = pods(endpoint);
      return { slot, endpoint, hairpin: { entry, present: hairpin?.has(entry) ?? false }, ...(pod !== undefined ? { pod } : {}) };
    }),
  };
}

/**
 * The views of `drover chains` in nftables mode. With `desired` (from
 * `--source`): one per desired frontend, in service port order, then the
 * table's other frontends by address; without: every frontend the table
 * holds an element of, by address. `pods` (model/pods.ts endpointPods of
 * the same source) names the Pod of each endpoint derived from one.
 * @throws UnsafeElementError for an element that is not of drover's shapes (elements.ts).
 */
export function nftFrontendViews(live: LiveTable, desired?: DesiredNft, pods: ReadonlyMap<string, string> = new Map()): NftFrontendView[] {
  const model = TableModel.fromLive(live);
  const affinity = new Map<string, { client: string; endpoint: string }[]>();
  for (const [key, endpoint] of live.sets.get(AFFINITY_MAP)?.elements ?? []) {
    const at = key.indexOf(' . ');
    const list = affinity.get(key.slice(at + 3)) ?? [];
    list.push({ client: key.slice(0, at), endpoint: endpoint ?? '' });
    affinity.set(key.slice(at + 3), list);
  }
  const view = (frontend: string, servicePort: string | null): NftFrontendView => {
    const podOf = (endpoint: string): string | undefined => {
      if (servicePort === null) return undefined;
      const t = parseTarget(endpoint);
      return pods.get(endpointPodKey(servicePort, `${t.ip}:${t.port}`));
    };
    const sets = [...model.sets].filter(([, e]) => e.has(frontend)).map(([name]) => name).sort(bySetOrder);
    const timeout = sets.map(timeoutOfSet).find((t) => t !== undefined);
    const pending: ElementOp[] = [];
    if (desired) planFrontend(model, frontend, desired.frontends.get(frontend), pending);
    return {
      servicePort,
      frontend,
      sets,
      selections: SELECTIONS.flatMap((sel) => selectionView(live, model, sel, frontend, podOf) ?? []),
      affinitySeconds: timeout ?? null,
      affinityEntries: (affinity.get(frontend) ?? []).sort((a, b) => compareAddresses(a.client, b.client)),
      firewall: firewallOf(model, frontend).map((e) => e.split(' . ')[3]!),
      ...(desired ? { pending } : {}),
    };
  };
  const wanted = [...(desired?.frontends.values() ?? [])];
  const order = new Map(wanted.map((f, i) => [f.frontend, i]));
  wanted.sort((a, b) => (a.servicePort < b.servicePort ? -1 : a.servicePort > b.servicePort ? 1 : order.get(a.frontend)! - order.get(b.frontend)!));
  const others = [...modelFrontends(model)].filter((f) => !desired?.frontends.has(f)).sort(compareFrontends);
  return [...wanted.map((f) => view(f.frontend, f.servicePort)), ...others.map((f) => view(f, null))];
}

function opText(o: ElementOp): string {
  return `${o.op} ${o.set} ${o.key}${o.value !== undefined ? ` : ${o.value}` : ''}`;
}

function pad(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i < r.length - 1 ? c.padEnd(widths[i]!) : c)).join('  ').trimEnd());
}

/**
 * The text of `drover chains --mode nftables`: per view a `# ` header
 * (service port and frontend, or the frontend alone), the sets holding it,
 * a table of slots per selection (`endpoints`, `local-endpoints`: slot,
 * endpoint, hairpin entry, marked "(missing)" when the table lacks it, and
 * a pod column when an endpoint came from a Pod), its affinity, its
 * firewall ranges and, with `--source`, what a full sync would write.
 * Without `--source` a first line says that frontends are listed by
 * address. Blank line between views.
 */
export function formatNftChains(views: readonly NftFrontendView[], withSource: boolean): string {
  const intro = withSource ? [] : ['(no --source: table ip drover keeps no service names, so frontends are listed by address)', ''];
  if (views.length === 0) return `${[...intro, 'no frontends in table ip drover'].join('\n')}\n`;
  const blocks = views.map((v) => {
    const header = v.servicePort !== null ? `# ${v.servicePort} (frontend ${v.frontend})` : `# ${v.frontend}${withSource ? ' (not in --source)' : ''}`;
    const lines = [header, `  sets: ${v.sets.join(', ') || 'none'}`];
    if (v.selections.length === 0) lines.push('  no endpoint slots');
    for (const s of v.selections) {
      const sel = SELECTIONS.find((x) => x.name === s.selection)!;
      const counts = s.counts.length === 0 ? 'in no count set: no rule picks from them' : s.counts.map((n) => countSetName(sel, n)).join(', ');
      lines.push(`  ${s.map} (${counts}):`);
      const withPods = s.slots.some((x) => x.pod !== undefined);
      const rows = [
        ['slot', 'endpoint', 'hairpin', ...(withPods ? ['pod'] : [])],
        ...s.slots.map((x) => [
          String(x.slot),
          x.endpoint ?? '(empty: that draw goes on to the next rule)',
          x.hairpin === null ? '' : x.hairpin.present ? x.hairpin.entry : `${x.hairpin.entry} (missing)`,
          ...(withPods ? [x.pod ?? '-'] : []),
        ]),
      ];
      lines.push(...pad(rows).map((r) => `    ${r}`));
    }
    if (v.affinitySeconds !== null) {
      const entries = v.affinityEntries.map((e) => `${e.client} -> ${e.endpoint}`);
      lines.push(`  affinity: ClientIP, ${v.affinitySeconds} s; entries: ${entries.join(', ') || 'none'}`);
    } else if (v.affinityEntries.length > 0) {
      lines.push(`  affinity: none, but entries: ${v.affinityEntries.map((e) => `${e.client} -> ${e.endpoint}`).join(', ')}`);
    }
    if (v.firewall.length > 0) lines.push(`  ${FIREWALL_ALLOW}: ${v.firewall.join(', ')}`);
    if (v.pending) lines.push(v.pending.length === 0 ? '  as --source wants it' : `  a full sync would write: ${v.pending.map(opText).join('; ')}`);
    return lines.join('\n');
  });
  return `${[...intro, blocks.join('\n\n')].join('\n')}\n`;
}
