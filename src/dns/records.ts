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
 *   hostname (§2.4.2), `PTR` for each ready endpoint with a hostname (§2.4.3);
 *   an endpoint without a hostname is named by its address with dashes
 *   (`10-244-1-2`), as CoreDNS names it, for its SRV target;
 * - an ExternalName Service ({@link externalNameRecords}): `CNAME` (§2.5).
 *
 * Record names are lower-case, without the trailing dot. TTLs are the
 * zone's (zone.ts) and are set when answering.
 */
import type { Answer } from 'dns-packet';
import { parseIP } from '../model/addr.ts';
import type { Protocol, ServicePort } from '../model/types.ts';

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
 * A Service whose namespace or name is not a DNS-1123 label has none.
 */
export function servicePortRecords(sp: ServicePort, zone: string): ZoneRecord[] {
  if (!isLabel(sp.namespace) || !isLabel(sp.name)) return [];
  const name = serviceName(sp.namespace, sp.name, zone);
  const out: ZoneRecord[] = [addressRecord(name, sp.clusterIP), { name: reverseName(sp.clusterIP), type: 'PTR', data: name }];
  if (sp.portName !== '' && isLabel(sp.portName)) {
    out.push({ name: srvName(sp.portName, sp.protocol, name), type: 'SRV', data: { priority: 0, weight: 100, port: sp.port, target: name } });
  }
  return out;
}

/** One port of a headless Service: its name ("" when unnamed), protocol and endpoint port. */
export interface HeadlessPort {
  readonly name: string;
  readonly protocol: Protocol;
  /** The endpoints' port, 1-65535 (an SRV record's port). */
  readonly port: number;
}

/** One endpoint address of a headless Service. */
export interface HeadlessEndpoint {
  /** Canonical IPv4 or IPv6 text. */
  readonly ip: string;
  /** The endpoint's Ready condition: only ready endpoints are published (specification §2.4.1). */
  readonly ready: boolean;
  /** The endpoint's `hostname` (a Pod's `spec.hostname` with a matching `spec.subdomain`), when it has one. */
  readonly hostname?: string;
}

/** A headless Service (`clusterIP: None`): its name, named ports and endpoints. */
export interface HeadlessService {
  readonly namespace: string;
  readonly name: string;
  readonly ports: readonly HeadlessPort[];
  readonly endpoints: readonly HeadlessEndpoint[];
}

/**
 * The records of a headless Service (see the module comment). With no
 * ready endpoint it has none, so its name is NXDOMAIN (specification
 * §2.4.1). SRV weights are 100 divided among the targets of a port, as
 * CoreDNS gives them.
 */
export function headlessRecords(svc: HeadlessService, zone: string): ZoneRecord[] {
  if (!isLabel(svc.namespace) || !isLabel(svc.name)) return [];
  const name = serviceName(svc.namespace, svc.name, zone);
  const ready = [...new Map(svc.endpoints.filter((e) => e.ready && parseIP(e.ip) !== undefined).map((e) => [e.ip, e])).values()];
  const out: ZoneRecord[] = [];
  const targets: string[] = [];
  for (const e of ready) {
    out.push(addressRecord(name, e.ip));
    const host = e.hostname !== undefined && isLabel(e.hostname) ? e.hostname : undefined;
    const target = `${host ?? e.ip.replaceAll(/[.:]/g, '-')}.${name}`;
    targets.push(target);
    out.push(addressRecord(target, e.ip));
    if (host !== undefined) out.push({ name: reverseName(e.ip), type: 'PTR', data: target });
  }
  const weight = targets.length > 0 ? Math.max(1, Math.floor(100 / targets.length)) : 0;
  for (const p of svc.ports) {
    if (p.name === '' || !isLabel(p.name)) continue;
    for (const target of targets) out.push({ name: srvName(p.name, p.protocol, name), type: 'SRV', data: { priority: 0, weight, port: p.port, target } });
  }
  return out;
}

/**
 * The record of an ExternalName Service: a CNAME from its name to
 * `externalName` (lower-cased, without a trailing dot; specification §2.5).
 * None when `externalName` is not a domain name of labels of 1-63 characters.
 */
export function externalNameRecords(namespace: string, name: string, externalName: string, zone: string): ZoneRecord[] {
  const target = externalName.toLowerCase().replace(/\.$/, '');
  if (!isLabel(namespace) || !isLabel(name) || target.length > 253 || !target.split('.').every((l) => /^[a-z0-9_]([-a-z0-9_]{0,61}[a-z0-9_])?$/.test(l))) return [];
  return [{ name: serviceName(namespace, name, zone), type: 'CNAME', data: target }];
}
