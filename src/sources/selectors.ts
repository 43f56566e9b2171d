/**
 * The Services with a selector, by namespace, kept in step with a
 * decoder's objects: which Services a Pod or a Node change may move
 * (decoder.ts). A Pod belongs to every Service of its namespace whose
 * selector selects it (model/pods.ts `selects`); a Node to every Service
 * with a selector, since the zone of a Pod-derived endpoint is its Node's.
 */
import { selects } from '../model/pods.ts';
import type { ParsedObject, ParsedPod, ParsedService } from '../model/parsed.ts';

/** See the module comment. Objects are held by reference, so duplicates of one identity are each kept. */
export class SelectorIndex {
  private readonly byNamespace = new Map<string, Set<ParsedService>>();

  /**
   * Forget the Services among `gone`, then learn those among `added`
   * (either may hold any kind of object). Costs what the lists hold.
   */
  update(gone: Iterable<ParsedObject>, added: Iterable<ParsedObject>): void {
    for (const o of gone) {
      if (o.kind !== 'Service' || o.selector.size === 0) continue;
      const set = this.byNamespace.get(o.namespace);
      set?.delete(o);
      if (set?.size === 0) this.byNamespace.delete(o.namespace);
    }
    for (const o of added) {
      if (o.kind !== 'Service' || o.selector.size === 0) continue;
      let set = this.byNamespace.get(o.namespace);
      if (!set) this.byNamespace.set(o.namespace, (set = new Set()));
      set.add(o);
    }
  }

  /** "namespace/name" of every Service that selects `pod`. Costs the Services with a selector in its namespace. */
  servicesOf(pod: ParsedPod): string[] {
    const out: string[] = [];
    for (const svc of this.byNamespace.get(pod.namespace) ?? []) if (selects(svc.selector, pod.labels)) out.push(`${svc.namespace}/${svc.name}`);
    return out;
  }

  /** "namespace/name" of every Service with a selector. */
  all(): string[] {
    return [...this.byNamespace.values()].flatMap((set) => [...set].map((svc) => `${svc.namespace}/${svc.name}`));
  }
}
