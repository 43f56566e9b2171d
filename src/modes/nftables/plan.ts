/**
 * What a sync writes in nftables mode: element operations that bring each
 * frontend from what the table holds (model.ts) to what is desired
 * (desired.ts), and the structural changes (sets, chains) the endpoint
 * counts in use need. Pure.
 *
 * Slots are kept where they are: an endpoint that stays keeps its slot, a
 * new endpoint takes a free slot, and when the count shrinks the endpoints
 * of the slots past the new count move into the freed ones. So adding or
 * removing one endpoint of N writes about three elements and moves the
 * frontend from `endpoint-count-N` to the set of its new count, whatever
 * the number of Services.
 */
import type { DesiredFrontend } from './desired.ts';
import { slotKeyText } from './elements.ts';
import {
  CLUSTER_IPS,
  EXTERNAL_IPS,
  EXTERNAL_LOCAL,
  FIREWALL,
  FIREWALL_ALLOW,
  HAIRPIN,
  MAIN,
  MEMBERSHIP_SETS,
  NO_ENDPOINTS,
  NO_LOCAL_ENDPOINTS,
  SELECTIONS,
  SERVICE_IPS,
  affinitySetName,
  countOfSet,
  countSetName,
  layout,
  timeoutOfSet,
  type ChainDecl,
  type Layout,
  type SetDecl,
  type Selection,
  type LayoutInputs,
} from './layout.ts';
import type { ElementOp, TableModel } from './model.ts';
import type { RenderOptions } from '../../config/render.ts';

/**
 * The slots of a frontend with endpoints `targets` (sorted), keeping what
 * `current` holds where it can. Returns an array of `targets.length`.
 */
export function assignSlots(current: readonly (string | undefined)[], targets: readonly string[]): string[] {
  const wanted = new Set(targets);
  const placed = new Set<string>();
  const slots: (string | undefined)[] = new Array(targets.length).fill(undefined);
  for (let s = 0; s < targets.length; s++) {
    const t = current[s];
    if (t !== undefined && wanted.has(t) && !placed.has(t)) {
      slots[s] = t;
      placed.add(t);
    }
  }
  const rest = targets.filter((t) => !placed.has(t));
  let next = 0;
  for (let s = 0; s < slots.length; s++) if (slots[s] === undefined) slots[s] = rest[next++];
  return slots as string[];
}

/** The frontend sets `want` puts a frontend in (layout.ts MEMBERSHIP_SETS); none for undefined (removed). */
export function memberships(want: DesiredFrontend | undefined): Set<string> {
  const on = new Set<string>();
  if (!want) return on;
  const serves = want.none === null && (want.targets.length > 0 || want.externalLocal);
  if (serves) on.add(SERVICE_IPS);
  if (serves && want.kind === 'cluster' && want.targets.length > 0) on.add(CLUSTER_IPS);
  if (serves && want.kind === 'external' && !want.externalLocal) on.add(EXTERNAL_IPS);
  if (serves && want.externalLocal) on.add(EXTERNAL_LOCAL);
  if (want.none === 'reject') on.add(NO_ENDPOINTS);
  if (want.none === 'drop') on.add(NO_LOCAL_ENDPOINTS);
  if (serves && want.firewall !== undefined) on.add(FIREWALL);
  return on;
}

/** The endpoints of `want` in selection `sel` (none when it does not serve). */
function selected(want: DesiredFrontend | undefined, sel: Selection): readonly string[] {
  if (!want || want.none !== null) return [];
  return sel === MAIN ? want.targets : want.local;
}

/** The elements of set firewall-allow that belong to `frontend`. Costs O(the set). */
export function firewallOf(model: TableModel, frontend: string): string[] {
  const prefix = `${frontend} . `;
  return [...(model.sets.get(FIREWALL_ALLOW) ?? [])].filter((e) => e.startsWith(prefix) && e.split(' . ').length === 4);
}

/** The affinity timeouts whose set holds `frontend`. Costs O(sets). */
function timeoutsOf(model: TableModel, frontend: string): number[] {
  const out: number[] = [];
  for (const [name, elements] of model.sets) {
    const t = timeoutOfSet(name);
    if (t !== undefined && elements.has(frontend)) out.push(t);
  }
  return out;
}

/**
 * Append to `ops` what frontend `frontend` needs to go from `model` to
 * `want` (undefined: remove it): its frontend sets, its slots and endpoint
 * count in each selection, its affinity set and its firewall entries.
 */
export function planFrontend(model: TableModel, frontend: string, want: DesiredFrontend | undefined, ops: ElementOp[]): void {
  const on = memberships(want);
  for (const set of MEMBERSHIP_SETS) {
    const has = model.has(set, frontend);
    if (has && !on.has(set)) ops.push({ op: 'delete', set, key: frontend });
    if (!has && on.has(set)) ops.push({ op: 'add', set, key: frontend });
  }
  for (const sel of SELECTIONS) {
    const targets = selected(want, sel);
    const current = model.slotsOf(sel, frontend);
    const slots = assignSlots(current, targets);
    for (let s = 0; s < Math.max(current.length, slots.length); s++) {
      const was = current[s];
      const now = slots[s];
      if (was !== now && was !== undefined) ops.push({ op: 'delete', set: sel.map, key: slotKeyText(frontend, s) });
      if (was !== now && now !== undefined) ops.push({ op: 'add', set: sel.map, key: slotKeyText(frontend, s), value: now });
    }
    const n = targets.length;
    for (const c of model.countsOf(sel, frontend)) if (c !== n) ops.push({ op: 'delete', set: countSetName(sel, c), key: frontend });
    if (n > 0 && !model.has(countSetName(sel, n), frontend)) ops.push({ op: 'add', set: countSetName(sel, n), key: frontend });
  }
  const seconds = on.has(SERVICE_IPS) ? want?.affinitySeconds : undefined;
  for (const t of timeoutsOf(model, frontend)) if (t !== seconds) ops.push({ op: 'delete', set: affinitySetName(t), key: frontend });
  if (seconds !== undefined && !model.has(affinitySetName(seconds), frontend)) ops.push({ op: 'add', set: affinitySetName(seconds), key: frontend });
  const allow = new Set(on.has(FIREWALL) ? want!.firewall : []);
  const have = firewallOf(model, frontend);
  for (const e of have) if (!allow.has(e)) ops.push({ op: 'delete', set: FIREWALL_ALLOW, key: e });
  const had = new Set(have);
  for (const e of allow) if (!had.has(e)) ops.push({ op: 'add', set: FIREWALL_ALLOW, key: e });
}

/** Append to `ops` what set `hairpin` needs to hold `want`; with `keepExtra`, nothing is deleted. */
export function planHairpin(model: TableModel, want: ReadonlySet<string>, keepExtra: boolean, ops: ElementOp[]): void {
  const have = model.sets.get(HAIRPIN) ?? new Set<string>();
  if (!keepExtra) for (const e of have) if (!want.has(e)) ops.push({ op: 'delete', set: HAIRPIN, key: e });
  for (const e of want) if (!have.has(e)) ops.push({ op: 'add', set: HAIRPIN, key: e });
}

/**
 * Order `ops` so the kernel can take them in one transaction: every
 * delete before every add (a slot changing endpoint is a delete and an add
 * of the same key), each kind grouped by set (sets by name), otherwise in
 * the order given.
 */
export function orderOps(ops: readonly ElementOp[]): ElementOp[] {
  const bySet = (a: ElementOp, b: ElementOp): number => (a.set < b.set ? -1 : a.set > b.set ? 1 : 0);
  return [...ops.filter((o) => o.op === 'delete').sort(bySet), ...ops.filter((o) => o.op === 'add').sort(bySet)];
}

/** The endpoint counts and affinity timeouts whose sets hold a frontend once `ops` are applied to `model`. */
export function inputsAfter(model: TableModel, ops: readonly ElementOp[]): LayoutInputs {
  const size = new Map<string, number>();
  for (const [name, elements] of model.sets) size.set(name, elements.size);
  for (const op of ops) size.set(op.set, (size.get(op.set) ?? 0) + (op.op === 'add' ? 1 : -1));
  return inputsOf([...size].filter(([, n]) => n > 0).map(([name]) => name));
}

/** The endpoint counts and affinity timeouts that set names `names` stand for. */
function inputsOf(names: Iterable<string>): LayoutInputs {
  const main = new Set<number>();
  const local = new Set<number>();
  const timeouts = new Set<number>();
  for (const name of names) {
    const c = countOfSet(name);
    if (c) (c.sel === MAIN ? main : local).add(c.n);
    const t = timeoutOfSet(name);
    if (t !== undefined) timeouts.add(t);
  }
  const asc = (x: Set<number>): number[] => [...x].sort((a, b) => a - b);
  return { counts: { main: asc(main), local: asc(local) }, timeouts: asc(timeouts) };
}

/** What the structure of the table needs. */
export interface StructurePlan {
  /**
   * Write the whole table again in one transaction (deleting it first when
   * it exists): it is missing, or a set has another type or a base chain
   * another hook, which cannot be changed in place.
   */
  readonly rebuild: boolean;
  /** Sets to add (missing). */
  readonly addSets: readonly SetDecl[];
  /** Chains to add, or to flush and fill again (other rules). */
  readonly writeChains: readonly ChainDecl[];
  /** Sets to delete (unused endpoint counts, unknown sets), once no rule refers to them. */
  readonly deleteSets: readonly string[];
  /** Chains unknown to the layout: flushed, then deleted. */
  readonly deleteChains: readonly string[];
}

/** True when a structure plan writes nothing. */
export function isEmptyStructure(p: StructurePlan): boolean {
  return !p.rebuild && p.addSets.length === 0 && p.writeChains.length === 0 && p.deleteSets.length === 0 && p.deleteChains.length === 0;
}

const REBUILD: StructurePlan = Object.freeze({ rebuild: true, addSets: [], writeChains: [], deleteSets: [], deleteChains: [] });

/**
 * The structural changes that turn `model`'s table into `want`. With
 * `prune` (a full sync on a complete source) sets and chains that `want`
 * does not have are deleted; without it (a partial sync, an incomplete
 * source) only what is missing is added.
 */
export function planStructure(model: TableModel, want: Layout, prune: boolean): StructurePlan {
  if (!model.exists) return REBUILD;
  const addSets: SetDecl[] = [];
  for (const s of want.sets) {
    const t = model.types.get(s.name);
    if (!t) addSets.push(s);
    else if (t.keyType !== s.keyType || t.mapType !== s.mapType) return REBUILD;
  }
  const writeChains: ChainDecl[] = [];
  for (const c of want.chains) {
    const live = model.chains.get(c.name);
    if (!live) {
      writeChains.push(c);
      continue;
    }
    if ((c.base === undefined) !== (live.base === undefined)) return REBUILD;
    const b = live.base;
    if (c.base && b && (c.base.type !== b.type || c.base.hook !== b.hook || c.base.priority !== b.priority || b.policy !== 'accept')) return REBUILD;
    if (live.comments.length !== c.rules.length || c.rules.some((r, i) => live.comments[i] !== r.comment)) writeChains.push(c);
  }
  const wantedSets = new Set(want.sets.map((s) => s.name));
  const wantedChains = new Set(want.chains.map((c) => c.name));
  const deleteChains = [...model.chains.keys()].filter((name) => !wantedChains.has(name));
  const deleteSets = prune ? [...model.types.keys()].filter((name) => !wantedSets.has(name)) : [];
  return { rebuild: false, addSets, writeChains, deleteSets, deleteChains };
}

/**
 * The layout for the endpoint counts and affinity timeouts in use after
 * `ops`, and with `keep` (a partial sync, an incomplete source: those are
 * added, never removed) also for every one `model` has a set of.
 */
export function layoutAfter(model: TableModel, ops: readonly ElementOp[], opts: RenderOptions, keep: boolean): Layout {
  const after = inputsAfter(model, ops);
  if (!keep) return layout(opts, after);
  const kept = inputsOf(model.types.keys());
  const union = (a: readonly number[], b: readonly number[]): number[] => [...new Set([...a, ...b])].sort((x, y) => x - y);
  return layout(opts, {
    counts: { main: union(after.counts.main, kept.counts.main), local: union(after.counts.local, kept.counts.local) },
    timeouts: union(after.timeouts, kept.timeouts),
  });
}
