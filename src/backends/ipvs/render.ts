/**
 * `drover render --mode ipvs`: what a full IPVS-mode sync writes onto an
 * empty node, as text an operator can read and replay by hand. Pure: needs
 * no root and touches no kernel.
 *
 * The sections are in the order a sync writes them (backend.ts): the
 * sysctls, the `ipset restore -exist` input, the `iptables-restore
 * --noflush` input, the ClusterIPs bound to kube-ipvs0, and the virtual and
 * real servers in the form `ipvsadm -S -n` prints them (ipvsadm(8),
 * ipvsadm.c print_service_entry), which `ipvsadm -R` reads back.
 */
import { planToRestore } from '../iptables/plan.ts';
import type { StaticRuleset } from '../iptables/static.ts';
import type { RealServer, VirtualServer } from './codec.ts';
import type { DesiredIpvsState } from './desired.ts';
import { planIpsetRestore, CLUSTER_IP_SET, LOOP_BACK_SET } from './ipset.ts';
import { DUMMY_INTERFACE } from './link.ts';
import { ipvsRulesPlan } from './rules.ts';
import { IPVS_SYSCTLS } from './sysctl.ts';

/** ipvsadm's option for a virtual server's protocol. */
const PROTOCOL_OPTION: Readonly<Record<VirtualServer['protocol'], string>> = { TCP: '-t', UDP: '-u', SCTP: '--sctp-service' };

/** ipvsadm's option for a forwarding method; "local" is the kernel's own choice for a local real server and has none. */
const FORWARDING_OPTION: Readonly<Partial<Record<RealServer['forwarding'], string>>> = { masq: '-m', tunnel: '-i', route: '-g' };

function forwardingOption(rs: RealServer): string {
  const option = FORWARDING_OPTION[rs.forwarding];
  if (!option) throw new Error(`real server ${rs.address}:${rs.port}: forwarding ${rs.forwarding} has no ipvsadm option`);
  return option;
}

/** A netmask (host order) in dotted-quad form. */
function dotted(mask: number): string {
  return [24, 16, 8, 0].map((b) => (mask >>> b) & 255).join('.');
}

/**
 * The virtual and real servers as `ipvsadm -S -n` prints them: per virtual
 * server `-A -t IP:PORT -s SCHED [-p TIMEOUT [-M NETMASK]]`, then its real
 * servers `-a -t IP:PORT -r IP:PORT -m -w WEIGHT [-x UPPER] [-y LOWER]`. Pure.
 * @throws Error for a real server with "local" forwarding.
 */
export function ipvsadmSaveLines(desired: DesiredIpvsState): string[] {
  const lines: string[] = [];
  for (const { vs, reals } of desired.virtualServers.values()) {
    const service = `${PROTOCOL_OPTION[vs.protocol]} ${vs.address}:${vs.port}`;
    let head = `-A ${service} -s ${vs.scheduler}`;
    if (vs.persistent) {
      head += ` -p ${vs.persistent.timeoutSeconds}`;
      if (vs.netmask !== undefined && vs.netmask !== 0xffffffff) head += ` -M ${dotted(vs.netmask)}`;
    }
    lines.push(head);
    for (const rs of reals.values()) {
      let line = `-a ${service} -r ${rs.address}:${rs.port} ${forwardingOption(rs)} -w ${rs.weight}`;
      if (rs.upperThreshold) line += ` -x ${rs.upperThreshold}`;
      if (rs.lowerThreshold) line += ` -y ${rs.lowerThreshold}`;
      lines.push(line);
    }
  }
  return lines;
}

/**
 * Everything a full IPVS-mode sync writes onto an empty node, in sections
 * that start with a `# ` line; `header` lines come first, each behind `# `.
 * @param statics IPVS mode's static iptables rules (ipvsStaticRules)
 * @throws IpsetValidationError for a set entry that is not valid (the constructors checked it first);
 *   Error for a real server with "local" forwarding (drover programs masquerade only).
 */
export function renderIpvs(desired: DesiredIpvsState, statics: StaticRuleset, header: readonly string[] = []): string {
  const sets = planIpsetRestore({ [CLUSTER_IP_SET]: desired.clusterIPSet, [LOOP_BACK_SET]: desired.loopBackSet }, new Map());
  const section = (title: string, lines: readonly string[]): string => `# ${title}\n${lines.map((l) => `${l}\n`).join('')}`;
  return [
    header.map((h) => `# ${h}\n`).join(''),
    section('sysctls', IPVS_SYSCTLS.map((s) => `${s.name}=${s.value}`)),
    section('ipset restore -exist', sets.input.split('\n').filter(Boolean)),
    `# iptables-restore --noflush\n${planToRestore(ipvsRulesPlan(statics, new Map()))}`,
    section(`${DUMMY_INTERFACE} (dummy, left down): addresses`, desired.addresses.map((a) => `${a}/32`)),
    section('ipvsadm -R (the form ipvsadm -S -n prints)', ipvsadmSaveLines(desired)),
  ].join('');
}
