/**
 * The DNS records of one Service, as the Kubernetes DNS-Based Service
 * Discovery specification, schema 1.1.0 (kubernetes/dns docs/specification.md),
 * defines them. Pure: the same input gives the same records, in the same order.
 *
 * - a ClusterIP service port ({@link servicePortRecords}): `A`/`AAAA` for
 *   `<svc>.<ns>.svc.<zone>` (§2.3.1), `SRV` for a named port at
 *   `_<port>._<proto>.<svc>.<ns>.svc.<zone>` (§2.3.2), `PTR` for the ClusterIP (§2.3.3);
 * - a headless Service ({@link headlessRecords}): one `A`/`AAAA` per ready
 *   endpoint at `<svc>.<ns>.svc.<zone>` and at `<hostname>.<svc>.<ns>.svc.<zone>`
 *   (§2.4.1), `SRV` per named port and ready endpoint targeting that
 *   name (§2.4.2), `PTR` for each ready endpoint to that name (§2.4.3);
 *   an endpoint without a `hostname` is named by its address with dashes
 *   (`10-244-1-2`), the system-assigned _hostname_ of §2.1 as CoreDNS makes it;
 * - an ExternalName Service ({@link externalNameRecords}): `CNAME` (§2.5).
 *
 * Record names are lower-case, without the trailing dot. TTLs are the
 * zone's (zone.ts) and are set when answering.
 */
import type { Answer } from 'dns-packet';
import { parseIP } from '../model/addr.ts';
import type { HeadlessService, Protocol, ServicePort } from '../model/types.ts';

/** A record in dns-packet's shape (any but EDNS's OPT pseudo-record); the zone sets TTL and class when it answers. */
export type ZoneRecord = Exclude<Answer, { type: 'OPT' }>;

/** A DNS-1123 label (RFC 1123 §2.1, lower case): what a namespace, a Service name, a port name and a hostname must be to name a record. */
const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Whether `text` is one DNS-1123 label of at most 63 characters. */
export function isLabel(text: string): boolean {
  return LABEL.test(text);
}

/** `<svc>.<ns>.svc.<zone>`: the name of a Service (specification §2.3.1). */
export function serviceName(namespace: string, name: string, zone: string): string {
  return `${name}.${namespace}.svc.${zone}`;
}

/**
 * The reverse-lookup name of an address (RFC 1035 §3.5 `in-addr.arpa`,
 * RFC 3596 §2.5 `ip6.arpa` nibbles), e.g. "1.0.96.10.in-addr.arpa".
 * @throws TypeError when `ip` is not an IPv4 or IPv6 address.
 */
export function reverseName(ip: string): string {
  const addr = parseIP(ip);
  if (addr === undefined) throw new TypeError(`${JSON.stringify(ip)} is not an IP address`);
  if (addr.family === 4) return `${addr.text.split('.').reverse().join('.')}.in-addr.arpa`;
  const nibbles = addr.value.toString(16).padStart(32, '0').split('').reverse();
  return `${nibbles.join('.')}.ip6.arpa`;
}

/** The address record of `ip`: `A` for IPv4, `AAAA` for IPv6. */
function addressRecord(name: string, ip: string): ZoneRecord {
  return { name, type: ip.includes(':') ? 'AAAA' : 'A', data: ip } as ZoneRecord;
}

/** The SRV owner name of a named port: `_<port>._<proto>.<service name>` (specification §2.3.2). */
function srvName(portName: string, protocol: Protocol, service: string): string {
  return `_${portName}._${protocol.toLowerCase()}.${service}`;
}

/**
 * The records of one ClusterIP service port of one family view (its
 * `clusterIP`): the Service's address record, the PTR of the ClusterIP, and
 * the SRV of the port when it is named. Two ports of one Service give the
 * same address and PTR records; the zone keeps one of each.
 * A Service whose namespace or name is not a DNS-1123 label, or whose name
 * is longer than 253 characters, has none.
 */
export function servicePortRecords(sp: ServicePort, zone: string): ZoneRecord[] {
  if (!isLabel(sp.namespace) || !isLabel(sp.name)) return [];
  const name = serviceName(sp.namespace, sp.name, zone);
  if (!fits(name)) return [];
  const out: ZoneRecord[] = [addressRecord(name, sp.clusterIP), { name: reverseName(sp.clusterIP), type: 'PTR', data: name }];
  if (sp.portName !== '' && isLabel(sp.portName)) {
    out.push({ name: srvName(sp.portName, sp.protocol, name), type: 'SRV', data: { priority: 0, weight: 100, port: sp.port, target: name } });
  }
  return out;
}

/** Whether `name` (without the trailing dot) fits a domain name: at most 253 characters, 255 octets on the wire (RFC 1035 §2.3.4). */
function fits(name: string): boolean {
  return name.length <= 253;
}

/**
 * The _hostname_ of a headless Service's endpoint (specification §2.1):
 * its `hostname` when it has one, else a name made of its address, dots or
 * colons turned to dashes (`10-244-1-2`, `fd00-10--5`), as CoreDNS's
 * kubernetes plugin names it; undefined when that is not a DNS-1123 label
 * (an IPv6 address that starts or ends with `::`).
 */
function endpointLabel(ip: string, hostname: string | undefined): string | undefined {
  if (hostname !== undefined && isLabel(hostname)) return hostname;
  const made = ip.replaceAll(/[.:]/g, '-');
  return isLabel(made) ? made : undefined;
}

/**
 * The records of a headless Service (specification §2.4): for each ready
 * endpoint address, an `A`/`AAAA` at `<svc>.<ns>.svc.<zone>` and at its
 * per-endpoint name `<hostname>.<svc>.<ns>.svc.<zone>` (see
 * {@link endpointLabel}), and a `PTR` from the address to that name; for
 * each named port of an endpoint group and each of the group's ready
 * endpoints, an `SRV` at `_<port>._<proto>.<svc>.<ns>.svc.<zone>` to the
 * per-endpoint name with the endpoint's port. With no ready endpoint there
 * is no record, so the name is NXDOMAIN (§2.4.1). SRV weights are 100
 * divided among the targets of a name, as CoreDNS gives them. A name
 * longer than 253 characters is left out.
 */
export function headlessRecords(svc: HeadlessService, zone: string): ZoneRecord[] {
  if (!isLabel(svc.namespace) || !isLabel(svc.name)) return [];
  const name = serviceName(svc.namespace, svc.name, zone);
  if (!fits(name)) return [];
  const out: ZoneRecord[] = [];
  const seen = new Set<string>();
  const add = (r: ZoneRecord) => {
    const key = `${r.name} ${r.type} ${JSON.stringify(r.data)}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(r);
    }
  };
  const srv: Array<{ name: string; port: number; target: string }> = [];
  for (const group of svc.groups) {
    const targets: string[] = [];
    for (const a of group.addresses) {
      if (!a.ready || parseIP(a.ip) === undefined) continue;
      add(addressRecord(name, a.ip));
      const label = endpointLabel(a.ip, group.hostnames?.get(a.ip));
      const target = label === undefined ? undefined : `${label}.${name}`;
      if (target === undefined || !fits(target)) continue;
      add(addressRecord(target, a.ip));
      add({ name: reverseName(a.ip), type: 'PTR', data: target });
      targets.push(target);
    }
    for (const p of group.ports) {
      if (p.name === '' || !isLabel(p.name)) continue;
      const owner = srvName(p.name, p.protocol, name);
      if (fits(owner)) for (const target of targets) srv.push({ name: owner, port: p.port, target });
    }
  }
  const perName = new Map<string, number>();
  const seenSrv = new Set<string>();
  const unique = srv.filter((r) => {
    const key = `${r.name} ${r.port} ${r.target}`;
    if (seenSrv.has(key)) return false;
    seenSrv.add(key);
    perName.set(r.name, (perName.get(r.name) ?? 0) + 1);
    return true;
  });
  for (const r of unique) {
    const weight = Math.max(1, Math.floor(100 / perName.get(r.name)!));
    out.push({ name: r.name, type: 'SRV', data: { priority: 0, weight, port: r.port, target: r.target } });
  }
  return out;
}

/**
 * The record of an ExternalName Service: a CNAME from its name to
 * `externalName` (lower-cased, without a trailing dot; specification §2.5).
 * None when `externalName` is not a domain name of labels of 1-63
 * characters, or either name is longer than 253 characters (the model has
 * already refused a bad `externalName` with a warning, model/dns-names.ts).
 */
export function externalNameRecords(namespace: string, name: string, externalName: string, zone: string): ZoneRecord[] {
  const target = externalName.toLowerCase().replace(/\.$/, '');
  if (!isLabel(namespace) || !isLabel(name) || !fits(serviceName(namespace, name, zone)) || !fits(target) || !target.split('.').every((l) => /^[a-z0-9_]([-a-z0-9_]{0,61}[a-z0-9_])?$/.test(l))) return [];
  return [{ name: serviceName(namespace, name, zone), type: 'CNAME', data: target }];
}
