/**
 * The Service DNS view: the zone (zone.ts) kept equal to the desired state
 * the proxier syncs. After each successful sync it is given the snapshot the
 * kernel now holds and, for a partial sync, the service ports that sync
 * wrote; it replaces the records of those alone. A full sync compares
 * service ports by identity (an unchanged Service keeps its ServicePort
 * objects, model/normalise.ts BuildMemo) and recomputes only those that
 * differ, so neither costs a rebuild of the zone.
 *
 * Each service port of each family view is one zone owner: `4 <key>` and
 * `6 <key>`. Each Service only DNS serves (Snapshot.dnsOnly: headless and
 * ExternalName Services) is one more, `dns <namespace/name>`, compared by
 * identity at every sync (the model keeps the object of an unchanged one,
 * model/normalise.ts), which costs a lookup per such Service.
 */
import type { DnsOnlyService, ServicePort, Snapshot } from '../model/types.ts';
import { externalNameRecords, headlessRecords, servicePortRecords } from './records.ts';
import type { Zone } from './zone.ts';

/** No DNS-only Service. */
const NO_DNS_ONLY: ReadonlyMap<string, DnsOnlyService> = new Map();

/** The owner name of a service port of one family view. */
function ownerOf(family: 4 | 6, key: string): string {
  return `${family} ${key}`;
}

/** See the module comment. */
export class ServiceDnsView {
  /** Owner → the ServicePort its records were made from. */
  private readonly from = new Map<string, ServicePort>();
  /** "namespace/name" → the DNS-only Service its records were made from. */
  private readonly dnsFrom = new Map<string, DnsOnlyService>();

  constructor(readonly zone: Zone) {}

  /**
   * Bring the zone to `snapshot`. `changed`: the service ports that changed
   * since the last call (a partial sync's keys); undefined: any may have
   * (a full sync), and every service port is compared by identity.
   * `keepMissing`: the snapshot may lack service ports that are still
   * programmed (the source was read in part, ChangeSet.incomplete), so the
   * names of those it does not list are kept, as their rules are.
   * @returns how many owners' records were replaced or removed.
   */
  apply(snapshot: Snapshot, changed?: ReadonlySet<string>, keepMissing = false): number {
    const views: Array<[4 | 6, ReadonlyMap<string, ServicePort>]> = [[4, snapshot.services], [6, snapshot.ipv6Services ?? new Map()]];
    let touched = this.applyDnsOnly(snapshot.dnsOnly ?? NO_DNS_ONLY, keepMissing);
    if (changed !== undefined) {
      for (const key of changed) {
        for (const [family, ports] of views) if (!keepMissing || ports.has(key)) touched += this.update(ownerOf(family, key), ports.get(key));
      }
      return touched;
    }
    for (const [family, ports] of views) for (const [key, sp] of ports) touched += this.update(ownerOf(family, key), sp);
    if (keepMissing) return touched;
    for (const owner of [...this.from.keys()]) {
      const [family, key] = [owner[0] === '6' ? views[1]![1] : views[0]![1], owner.slice(2)];
      if (!family.has(key)) touched += this.update(owner, undefined);
    }
    return touched;
  }

  /** Bring the DNS-only Services' owners to `services` (those missing kept when `keepMissing`); how many changed. */
  private applyDnsOnly(services: ReadonlyMap<string, DnsOnlyService>, keepMissing: boolean): number {
    let touched = 0;
    for (const [key, svc] of services) {
      if (this.dnsFrom.get(key) === svc) continue;
      this.dnsFrom.set(key, svc);
      const records = svc.kind === 'headless' ? headlessRecords(svc, this.zone.domain) : externalNameRecords(svc.namespace, svc.name, svc.externalName, this.zone.domain);
      this.zone.set(`dns ${key}`, records);
      touched++;
    }
    if (keepMissing || this.dnsFrom.size === services.size) return touched;
    for (const key of [...this.dnsFrom.keys()]) {
      if (services.has(key)) continue;
      this.dnsFrom.delete(key);
      this.zone.delete(`dns ${key}`);
      touched++;
    }
    return touched;
  }

  /**
   * Replace one owner's records when its service port is another object
   * whose records differ; 1 when it did. An endpoint change makes a new
   * ServicePort with the same records (servicePortRecords reads no
   * endpoint): the zone, and so its generation and the cache of encoded
   * answers (zone-answer-cache.ts), are left alone.
   */
  private update(owner: string, sp: ServicePort | undefined): number {
    const was = this.from.get(owner);
    if (was === sp) return 0;
    if (was !== undefined && sp !== undefined && sameRecords(was, sp)) {
      this.from.set(owner, sp);
      return 0;
    }
    if (sp === undefined) {
      this.from.delete(owner);
      this.zone.delete(owner);
    } else {
      this.from.set(owner, sp);
      this.zone.set(owner, servicePortRecords(sp, this.zone.domain));
    }
    return 1;
  }
}

/** Whether `a` and `b` give the same records: servicePortRecords reads these fields alone. */
function sameRecords(a: ServicePort, b: ServicePort): boolean {
  return a.namespace === b.namespace && a.name === b.name && a.clusterIP === b.clusterIP && a.portName === b.portName && a.protocol === b.protocol && a.port === b.port;
}
