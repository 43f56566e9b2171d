/**
 * IPVS's connection table, as the kernel prints it in /proc/net/ip_vs_conn
 * of the reading process's network namespace (ip_vs_conn_seq_show,
 * net/netfilter/ipvs/ip_vs_conn.c): one line per connection,
 *
 *   Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
 *   TCP C0A86402 9D4C AC1E0032 0050 0AB40001 1F90 ESTABLISHED      899
 *
 * with IPv4 addresses as 8 hex digits (host order) and IPv6 ones as eight
 * groups of 4 hex digits (%pI6), ports as 4 hex digits. ToIP:TPrt is the
 * virtual address the client connected to; State is IPVS's own TCP state.
 */
import { readFile } from 'node:fs/promises';
import { parseIP, uint32ToIPv4 } from '../../model/addr.ts';
import type { IpvsProtocol } from './codec.ts';

/** One entry of IPVS's connection table. */
export interface IpvsConnection {
  readonly protocol: IpvsProtocol;
  /** The virtual address, canonical text ("172.30.0.50", "fd00::a"). */
  readonly virtualAddress: string;
  /** 0-65535. */
  readonly virtualPort: number;
  /** IPVS's state name: ESTABLISHED, SYN_RECV, SYN_SENT, FIN_WAIT, TIME_WAIT, CLOSE… (UDP: UDP; SCTP: its own). */
  readonly state: string;
}

const PROTOCOLS: ReadonlySet<string> = new Set<IpvsProtocol>(['TCP', 'UDP', 'SCTP']);

/** An address as the table prints it: 8 hex digits (IPv4) or %pI6 text; undefined when it is neither. */
function tableAddress(text: string): string | undefined {
  if (/^[0-9A-Fa-f]{8}$/.test(text)) return uint32ToIPv4(Number.parseInt(text, 16));
  return text.includes(':') ? parseIP(text)?.text : undefined;
}

/**
 * The entries of `text`, the contents of /proc/net/ip_vs_conn; the header
 * and any line that does not read as an entry are skipped. Pure.
 */
export function parseIpvsConnections(text: string): IpvsConnection[] {
  const out: IpvsConnection[] = [];
  for (const line of text.split('\n')) {
    const [protocol, , , to, toPort, , , state] = line.trim().split(/\s+/);
    if (protocol === undefined || !PROTOCOLS.has(protocol) || to === undefined || toPort === undefined || state === undefined) continue;
    const virtualAddress = tableAddress(to);
    if (virtualAddress === undefined || !/^[0-9A-Fa-f]{4}$/.test(toPort)) continue;
    out.push({ protocol: protocol as IpvsProtocol, virtualAddress, virtualPort: Number.parseInt(toPort, 16), state });
  }
  return out;
}

/**
 * IPVS's connection table in this process's network namespace; empty when
 * the kernel has none (no IPVS module: no /proc/net/ip_vs_conn).
 * @throws Error when the file exists but cannot be read.
 */
export async function readIpvsConnections(path = '/proc/net/ip_vs_conn'): Promise<IpvsConnection[]> {
  try {
    return parseIpvsConnections(await readFile(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}
