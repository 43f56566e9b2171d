/**
 * Text identities of IPVS virtual and real servers, the keys the fake and
 * the IPVS mode index them by (ipvsadm's notation: "TCP/10.96.0.10:80",
 * "10.244.1.2:8080").
 */
import type { RealServerKey, VirtualServerKey } from './codec.ts';

/** Identity of a virtual server as text: "TCP/10.96.0.10:80". */
export function virtualServerKey(vs: VirtualServerKey): string {
  return `${vs.protocol}/${vs.address}:${vs.port}`;
}

/** Identity of a real server within its virtual server: "10.244.1.2:8080". */
export function realServerKey(rs: RealServerKey): string {
  return `${rs.address}:${rs.port}`;
}
