/**
 * The frontends a family backend serves, settled by the model's index
 * (model/frontend-index.ts) before the mode plans anything, so that every
 * mode serves the same owner of a frontend two service ports want and
 * warns the same way. A full sync rebuilds the index; a partial sync
 * updates it with the changed service ports only, and widens the changes by
 * the service ports that gained or lost a frontend through them.
 */
import { familyView, IP_FAMILIES } from '../../model/family.ts';
import { FrontendIndex, refusalText, settleView } from '../../model/frontend-index.ts';
import type { IPFamily, Snapshot } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import type { ChangeSet } from '../../proxier/backend.ts';

/** One family backend's index of served frontends. Not thread safe: used inside the backend's sync. */
export class ServedFrontends {
  private index: FrontendIndex | null = null;

  constructor(
    private readonly family: IPFamily,
    private readonly logger: Logger,
  ) {}

  /**
   * `view` (the family's view, family.ts) as served, and `changes` widened
   * by the service ports whose served frontends changed. Each refusal is
   * logged as a warning once, when it starts to hold. Cost: a full sync's
   * frontends, or a partial sync's changed ones; the view is not copied.
   */
  settle(view: Snapshot, changes: ChangeSet): { view: Snapshot; changes: ChangeSet } {
    let widened = changes;
    if (changes.full || this.index === null) {
      const before = this.index?.refusals() ?? [];
      this.index = FrontendIndex.of(view, this.family);
      const known = new Set(before.map((r) => refusalText(r, this.family)));
      this.warn(this.index.refusals().map((r) => refusalText(r, this.family)).filter((text) => !known.has(text)));
    } else {
      const delta = this.index.update(view, changes.changed);
      this.warn(delta.refusals.map((r) => refusalText(r, this.family)));
      if (delta.changed.size > changes.changed.size) widened = { ...changes, changed: delta.changed };
    }
    return { view: this.index.view(view), changes: widened };
  }

  private warn(lines: readonly string[]): void {
    for (const line of lines) this.logger.warn({ family: this.family }, line);
  }
}

/**
 * The warnings of every frontend refused in `snapshot`, IPv4 first
 * (model/frontend-index.ts refusalText): what `render` lists as left out in
 * every mode. Pure; O(frontends).
 */
export function servedRefusals(snapshot: Snapshot): string[] {
  return IP_FAMILIES.flatMap((family) => settleView(familyView(snapshot, family), family).refusals.map((r) => refusalText(r, family)));
}
