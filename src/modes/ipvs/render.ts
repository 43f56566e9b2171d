/**
 * `drover render --mode ipvs`: what a full IPVS-mode sync writes onto an
 * empty node, as text an operator can read and replay by hand. Pure: needs
 * no root and touches no kernel.
 *
 * The sections are in the order a sync writes them (backend.ts): the
 * sysctls, the `ipset restore -exist` input, the `iptables-restore
 * --noflush` input, the addresses bound to kube-ipvs0 (ClusterIPs, external
 * and LoadBalancer IPs that are not the host's own), and the virtual and
 * real servers in the form and order `ipvsadm -S -n` prints them
 * (ipvsadm(8): `--sort` is the default; ipvsadm.c print_service_entry and
 * fwd_switch), which `ipvsadm -R` reads back.
 *
 * The IPv6 family renders the same sections for its own view: its sysctl,
 * its sets (KUBE-6-…, `family inet6`), the ip6tables rules, /128 addresses
 * and the virtual servers as ipvsadm prints IPv6 ones ("[fd00::a]:80").
 *
 * Every value printed has been validated by the model; the lines are checked
 * again here (ipset entries by checkEntry, virtual and real servers by the
 * codec's validators, header lines for line breaks).
 */
import { compareAddresses, joinHostPort, uint32ToIPv4 } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import { planToRestore } from '../../kernel/iptables/plan.ts';
import type { StaticRuleset } from '../shared/kube-chains/static.ts';
import { validateRealServer, validateVirtualServer, type RealServer, type VirtualServer } from '../../kernel/ipvs/codec.ts';
import type { DesiredIpvsState, DesiredVirtualServer } from './desired.ts';
import { planIpsetRestore } from './ipset.ts';
import { DUMMY_INTERFACE, hostPrefixLength } from '../../kernel/rtnetlink/link.ts';
import { ipvsRulesPlan } from './rules.ts';
import { ipvsSysctls } from './sysctl.ts';

/** ipvsadm's option for a virtual server's protocol. */
const PROTOCOL_OPTION: Readonly<Record<VirtualServer['protocol'], string>> = { TCP: '-t', UDP: '-u', SCTP: '--sctp-service' };

/** ipvsadm's option for a forwarding method (fwd_switch: local forwarding prints as -g, like direct routing). */
const FORWARDING_OPTION: Readonly<Record<RealServer['forwarding'], string>> = { masq: '-m', tunnel: '-i', route: '-g', local: '-g' };

/** IP protocol numbers, ipvsadm's first sort key (libipvs ipvs_cmp_services). */
const PROTOCOL_NUMBER: Readonly<Record<VirtualServer['protocol'], number>> = { TCP: 6, UDP: 17, SCTP: 132 };

/** ipvsadm's order of virtual servers: protocol number, then address, then port. */
function compareServers(a: DesiredVirtualServer, b: DesiredVirtualServer): number {
  return PROTOCOL_NUMBER[a.vs.protocol] - PROTOCOL_NUMBER[b.vs.protocol] || compareAddresses(a.vs.address, b.vs.address) || a.vs.port - b.vs.port;
}

/** ipvsadm's order of real servers: address, then port. */
function compareReals(a: RealServer, b: RealServer): number {
  return compareAddresses(a.address, b.address) || a.port - b.port;
}

/**
 * The virtual and real servers as `ipvsadm -S -n` prints them, in its
 * order: per virtual server `-A PROTO IP:PORT -s SCHED [-p TIMEOUT [-M
 * NETMASK]]` (PROTO is `-t`, `-u` or `--sctp-service`), then its real
 * servers `-a PROTO IP:PORT -r IP:PORT FWD -w WEIGHT` (FWD `-m`, `-i` or
 * `-g`). Connection thresholds are not printed, as ipvsadm does not print
 * them; drover sets none. Pure.
 * @throws IpvsValidationError for a virtual or real server the codec would refuse.
 */
export function ipvsadmSaveLines(desired: DesiredIpvsState): string[] {
  const lines: string[] = [];
  for (const { vs, reals } of [...desired.virtualServers.values()].sort(compareServers)) {
    validateVirtualServer(vs);
    const v6 = vs.address.includes(':');
    const service = `${PROTOCOL_OPTION[vs.protocol]} ${joinHostPort(vs.address, vs.port)}`;
    let head = `-A ${service} -s ${vs.scheduler}`;
    if (vs.persistent) {
      head += ` -p ${vs.persistent.timeoutSeconds}`;
      // IPv6: ipvsadm prints the prefix length, and nothing for 128.
      if (v6 && vs.netmask !== undefined && vs.netmask !== 128) head += ` -M ${vs.netmask}`;
      if (!v6 && vs.netmask !== undefined && vs.netmask !== 0xffffffff) head += ` -M ${uint32ToIPv4(vs.netmask)}`;
    }
    lines.push(head);
    for (const rs of [...reals.values()].sort(compareReals)) {
      validateRealServer(rs);
      lines.push(`-a ${service} -r ${joinHostPort(rs.address, rs.port)} ${FORWARDING_OPTION[rs.forwarding]} -w ${rs.weight}`);
    }
  }
  return lines;
}

/**
 * Everything a full IPVS-mode sync writes onto an empty node, in sections
 * that start with a `# ` line; `header` lines come first, each behind `# `.
 * @param statics IPVS mode's static iptables rules (ipvsStaticRules) of `family`
 * @param family the family `desired` is the view of (default IPv4): its sysctls, set names, restore command and address length
 * @throws IpsetValidationError for a set entry that is not valid (the constructors checked it first);
 *   IpvsValidationError, see {@link ipvsadmSaveLines}; Error for a header line with a line break.
 */
export function renderIpvs(desired: DesiredIpvsState, statics: StaticRuleset, header: readonly string[] = [], family: IPFamily = 'IPv4'): string {
  for (const h of header) if (/[\r\n]/.test(h)) throw new Error(`render header line ${JSON.stringify(h)} holds a line break`);
  const sets = planIpsetRestore(desired.sets, new Map(), family);
  const section = (title: string, lines: readonly string[]): string => `# ${title}\n${lines.map((l) => `${l}\n`).join('')}`;
  const restore = family === 'IPv6' ? 'ip6tables-restore' : 'iptables-restore';
  const length = hostPrefixLength(family);
  return [
    header.map((h) => `# ${h}\n`).join(''),
    section('sysctls', ipvsSysctls(family).map((s) => `${s.name}=${s.value}`)),
    section('ipset restore -exist', sets.input.split('\n').filter(Boolean)),
    // Against empty tables there are no iptables-mode leftovers: iptables mode's rules need not be read.
    `# ${restore} --noflush\n${planToRestore(ipvsRulesPlan(statics, new Map(), { chains: new Map(), hooks: [] }))}`,
    section(`${DUMMY_INTERFACE} (dummy, left down): addresses`, desired.addresses.map((a) => `${a}/${length}`)),
    section('ipvsadm -R (the form ipvsadm -S -n prints)', ipvsadmSaveLines(desired)),
  ].join('');
}
