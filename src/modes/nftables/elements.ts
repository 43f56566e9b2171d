/**
 * The set and map elements of nftables mode, as values and as the text
 * `nft` reads and prints (nft(8), "SETS" and "MAPS": a concatenation is
 * written `a . b . c`). Every element drover writes is one of these shapes:
 *
 * - a **frontend**: `ip . protocol . port`, the ClusterIP, `tcp`/`udp`/`sctp`
 *   and the service port (sets `service-ips`, `no-endpoints`,
 *   `no-local-endpoints`, `endpoint-count-N`);
 * - a **slot**: a frontend and a slot number 0..N-1 (map `endpoints`, key),
 *   and the endpoint in that slot, `ip . port` (its value);
 * - a **hairpin** entry: `endpoint ip . endpoint ip . protocol . port`
 *   (set `hairpin`);
 * - a **firewall** entry: a frontend and a client range (set
 *   `firewall-allow`, an interval set);
 * - an **affinity** entry: `client . frontend` to an endpoint (map
 *   `affinity`, written by the kernel; drover only deletes).
 *
 * Every value is checked before it becomes text: an address must be a
 * canonical dotted quad or canonical IPv6 text (RFC 5952, as nft prints
 * it: `fd00::10`), a port 1-65535, a protocol one of the three. The same
 * shapes fill the IPv4 table `ip drover` and the IPv6 table `ip6 drover`
 * (layout.ts); which family an element is of follows from its addresses,
 * and the set's type (or the netlink writer's field layout) refuses an
 * address of the other family.
 */
import { formatCIDR, isCanonicalIPv4, parseCIDR, parseIP } from '../../model/addr.ts';
import { DroverError } from '../../errors.ts';

/** Transport protocol as nft spells it. */
export type NftProtocol = 'tcp' | 'udp' | 'sctp';

/** A value that would not be a valid element: never written. */
export class UnsafeElementError extends DroverError {
  constructor(
    what: string,
    readonly value: string,
  ) {
    super(`refusing to write ${what} ${JSON.stringify(value)} into nftables: not a valid ${what}`, { field: what });
    this.name = 'UnsafeElementError';
  }
}

/** One frontend: where clients connect. */
export interface Frontend {
  readonly ip: string;
  readonly protocol: NftProtocol;
  readonly port: number;
}

/** One endpoint: where a slot sends connections. */
export interface Target {
  readonly ip: string;
  readonly port: number;
}

/** `ip`, checked. @throws UnsafeElementError */
export function safeIPv4(ip: string, field = 'IPv4 address'): string {
  if (!isCanonicalIPv4(ip)) throw new UnsafeElementError(field, ip);
  return ip;
}

/** `ip`, checked to be a canonical IPv4 or IPv6 address (model/addr.ts parseIP). @throws UnsafeElementError */
export function safeIP(ip: string, field = 'IP address'): string {
  if (parseIP(ip)?.text !== ip) throw new UnsafeElementError(field, ip);
  return ip;
}

/** `port`, checked to be 1-65535. @throws UnsafeElementError */
export function safePort(port: number, field = 'port'): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UnsafeElementError(field, String(port));
  return port;
}

/** The nft name of a Kubernetes protocol. @throws UnsafeElementError for anything but TCP, UDP and SCTP. */
export function nftProtocol(protocol: string): NftProtocol {
  const p = protocol.toLowerCase();
  if (p !== 'tcp' && p !== 'udp' && p !== 'sctp') throw new UnsafeElementError('protocol', protocol);
  return p;
}

/** `10.96.0.10 . tcp . 80`, `fd00::10 . tcp . 80`. @throws UnsafeElementError */
export function frontendText(f: Frontend): string {
  return `${safeIP(f.ip)} . ${nftProtocol(f.protocol)} . ${safePort(f.port)}`;
}

/** `10.244.1.2 . 8080`. @throws UnsafeElementError */
export function targetText(t: Target): string {
  return `${safeIP(t.ip)} . ${safePort(t.port)}`;
}

/** The key of slot `slot` of a frontend: `10.96.0.10 . tcp . 80 . 3`. */
export function slotKeyText(frontend: string, slot: number): string {
  if (!Number.isInteger(slot) || slot < 0) throw new UnsafeElementError('slot', String(slot));
  return `${frontend} . ${slot}`;
}

/** The hairpin entry of an endpoint of a frontend: `10.244.1.2 . 10.244.1.2 . tcp . 8080`. */
export function hairpinText(protocol: NftProtocol, t: Target): string {
  const ip = safeIP(t.ip);
  return `${ip} . ${ip} . ${nftProtocol(protocol)} . ${safePort(t.port)}`;
}

/** Split a frontend's text back into its parts. @throws UnsafeElementError when it is not one. */
export function parseFrontend(text: string): Frontend {
  const parts = text.split(' . ');
  if (parts.length !== 3) throw new UnsafeElementError('frontend', text);
  return { ip: safeIP(parts[0]!), protocol: nftProtocol(parts[1]!), port: safePort(Number(parts[2])) };
}

/** Split a target's text back into its parts. @throws UnsafeElementError when it is not one. */
export function parseTarget(text: string): Target {
  const parts = text.split(' . ');
  if (parts.length !== 2) throw new UnsafeElementError('endpoint', text);
  return { ip: safeIP(parts[0]!), port: safePort(Number(parts[1])) };
}

/** Split a slot key into its frontend's text and its slot number. @throws UnsafeElementError when it is not one. */
export function parseSlotKey(text: string): { readonly frontend: string; readonly slot: number } {
  const at = text.lastIndexOf(' . ');
  const slot = Number(text.slice(at + 3));
  if (at < 0 || !Number.isInteger(slot) || slot < 0) throw new UnsafeElementError('slot key', text);
  const frontend = text.slice(0, at);
  parseFrontend(frontend);
  return { frontend, slot };
}

/**
 * An element of set firewall-allow: a frontend's text and a client range,
 * `198.51.100.10 . tcp . 80 . 192.168.100.0/24`; a /32 (IPv6: /128) is
 * written as the bare address, as nft prints it back.
 * @throws UnsafeElementError when `cidr` is not a CIDR of the frontend's family.
 */
export function firewallText(frontend: string, cidr: string): string {
  const parsed = parseCIDR(cidr);
  const { ip } = parseFrontend(frontend);
  if (!parsed || parsed.prefix.family !== parseIP(ip)!.family) throw new UnsafeElementError('client range', cidr);
  const text = formatCIDR(parsed.prefix);
  const host = `/${parsed.prefix.family === 4 ? 32 : 128}`;
  return `${frontend} . ${text.endsWith(host) ? text.slice(0, -host.length) : text}`;
}
