/**
 * What nftables mode knows of its table: the sets with their elements, the
 * slots of the `endpoints` map per frontend, and the structure (set types,
 * chains and their rules' comments). Built from a read-back (full sync) and
 * kept up to date with what each sync wrote, so that a partial sync plans
 * against it without reading the kernel.
 */
import { AFFINITY_MAP, SELECTIONS, countOfSet, type Selection } from './layout.ts';
import { parseSlotKey, slotKeyText } from './elements.ts';
import type { LiveChain, LiveSet, LiveTable } from './live.ts';

/** One element written or deleted. `value` is a map element's value (slot maps); deleting needs only the key. */
export interface ElementOp {
  readonly op: 'add' | 'delete';
  readonly set: string;
  readonly key: string;
  readonly value?: string;
}

/** A set's declared types. */
export interface SetTypes {
  readonly keyType: string;
  readonly mapType?: string;
}

/** The table as drover knows it. */
export class TableModel {
  /** Whether the table exists. */
  exists = false;
  /** Every set (not the maps) by name, with its elements. */
  readonly sets = new Map<string, Set<string>>();
  /** Declared types of every set and map, by name. */
  readonly types = new Map<string, SetTypes>();
  /** Each selection's slot map, by map name, per frontend: slot i holds the endpoint text, or undefined for a hole (a read-back can have them). */
  readonly slots = new Map<string, Map<string, (string | undefined)[]>>(SELECTIONS.map((sel) => [sel.map, new Map()]));
  /** The affinity map's entries as read back: `client . frontend` → endpoint. Not kept up to date between full syncs. */
  readonly affinity = new Map<string, string>();
  /** Every chain, with its rules' comments. */
  readonly chains = new Map<string, LiveChain>();

  /** The model of a read-back. */
  static fromLive(live: LiveTable): TableModel {
    const m = new TableModel();
    m.exists = live.exists;
    for (const [name, set] of live.sets) {
      m.types.set(name, { keyType: set.keyType, ...(set.mapType !== undefined ? { mapType: set.mapType } : {}) });
      const slotMap = m.slots.get(name);
      if (slotMap) {
        for (const [key, value] of set.elements) {
          const { frontend, slot } = parseSlotKey(key);
          let slots = slotMap.get(frontend);
          if (!slots) slotMap.set(frontend, (slots = []));
          slots[slot] = value;
        }
      } else if (name === AFFINITY_MAP) {
        for (const [key, value] of set.elements) if (value !== undefined) m.affinity.set(key, value);
      } else {
        m.sets.set(name, new Set(set.elements.keys()));
      }
    }
    for (const [name, chain] of live.chains) m.chains.set(name, chain);
    return m;
  }

  /**
   * The table as a read-back would give it ({@link fromLive}'s inverse): a
   * slot map's elements are `frontend . slot` → endpoint, holes left out.
   * Lets the inspect commands' evaluators run on the table a plan writes,
   * without a kernel.
   */
  toLive(): LiveTable {
    const sets = new Map<string, LiveSet>();
    for (const [name, types] of this.types) sets.set(name, { ...types, elements: this.elementsOf(name) });
    return { exists: this.exists, sets, chains: new Map(this.chains) };
  }

  /** The elements of set or map `name` as a read-back gives them (key → a map element's value); empty for a set it does not know. Costs O(its elements). */
  elementsOf(name: string): Map<string, string | undefined> {
    const elements = new Map<string, string | undefined>();
    const slotMap = this.slots.get(name);
    if (slotMap) {
      for (const [frontend, slots] of slotMap) slots.forEach((t, i) => t !== undefined && elements.set(slotKeyText(frontend, i), t));
    } else if (name === AFFINITY_MAP) {
      for (const [key, value] of this.affinity) elements.set(key, value);
    } else {
      for (const key of this.sets.get(name) ?? []) elements.set(key, undefined);
    }
    return elements;
  }

  /** The endpoint counts of selection `sel` whose set holds `frontend`. Costs O(count sets). */
  countsOf(sel: Selection, frontend: string): number[] {
    const counts: number[] = [];
    for (const [name, elements] of this.sets) {
      const c = countOfSet(name);
      if (c !== undefined && c.sel === sel && elements.has(frontend)) counts.push(c.n);
    }
    return counts;
  }

  /** The slots of `frontend` in selection `sel`'s map (empty when none). */
  slotsOf(sel: Selection, frontend: string): readonly (string | undefined)[] {
    return this.slots.get(sel.map)!.get(frontend) ?? [];
  }

  /** True when set `name` holds `key`. */
  has(name: string, key: string): boolean {
    return this.sets.get(name)?.has(key) ?? false;
  }

  /** Apply element operations that the kernel accepted. */
  apply(ops: readonly ElementOp[]): void {
    for (const op of ops) {
      const slotMap = this.slots.get(op.set);
      if (slotMap) {
        const { frontend, slot } = parseSlotKey(op.key);
        let slots = slotMap.get(frontend);
        if (!slots) slotMap.set(frontend, (slots = []));
        slots[slot] = op.op === 'add' ? op.value : undefined;
        while (slots.length > 0 && slots[slots.length - 1] === undefined) slots.pop();
        if (slots.length === 0) slotMap.delete(frontend);
        continue;
      }
      if (op.set === AFFINITY_MAP) {
        if (op.op === 'delete') this.affinity.delete(op.key);
        continue;
      }
      let set = this.sets.get(op.set);
      if (!set) this.sets.set(op.set, (set = new Set()));
      if (op.op === 'add') set.add(op.key);
      else set.delete(op.key);
    }
  }
}
