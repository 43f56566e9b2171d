/**
 * The dataplane around the DNS address, in every mode: connection tracking
 * is bypassed for DNS traffic to and from it, and that traffic is accepted,
 * as NodeLocal DNSCache's rules do (k8s.io/dns cmd/node-cache: raw
 * PREROUTING and OUTPUT `-j NOTRACK` for `--dport 53` to the address and
 * `--sport 53` from it, filter INPUT and OUTPUT `-j ACCEPT` for the same),
 * so that DNS answers never wait on a conntrack entry (kubernetes 56903:
 * the 5-second delay of parallel A/AAAA queries).
 *
 * - iptables and IPVS modes: the chain `DROVER-DNS` in the raw and filter
 *   tables ({@link iptablesPayload}), jumped to from the first rule of raw
 *   PREROUTING and OUTPUT and filter INPUT and OUTPUT. kube-proxy's chains
 *   and drover's other chains are untouched.
 * - nftables mode: the table `inet drover-dns` ({@link nftRuleset}): chains
 *   at the raw priority (-300) with `notrack`, and at the filter priority
 *   with `accept`, beside the mode's own `ip drover` / `ip6 drover`.
 *
 * With `--dns-intercept-cluster-dns`, the same rules are written for the
 * cluster DNS ClusterIP, port 53 ({@link DnsEndpoint.intercept}), as
 * NodeLocal DNSCache writes them for each address of its `-localip`:
 * an untracked packet never reaches a nat chain (iptables-extensions(8),
 * NOTRACK/CT; nft(8): `notrack`, and nat chains see only a connection's
 * first packet), so the mode's DNAT of that ClusterIP is bypassed in the
 * iptables mode (KUBE-SERVICES in nat) and the nftables mode (nat chains at
 * priority -100, after these at -300), and the packet goes to the address
 * bound locally. IPVS mode is not covered: IPVS takes a virtual server's
 * packets at LOCAL_IN whether they are tracked or not (run refuses it).
 *
 * Nothing is written unless `--dns-address` is set; {@link removeDnsDataplane}
 * (`drover cleanup`) removes both forms.
 */
import { runCommand, runCommand as runIn } from '../kernel/exec.ts';
import { detectVariant, type IptablesVariant } from '../kernel/iptables/exec.ts';
import { parseIP } from '../model/addr.ts';
import { NFT } from '../modes/nftables/exec.ts';
import { INTERCEPT_PORT } from './intercept.ts';

/** drover's chain for the DNS address, in the raw and filter tables. */
export const DNS_CHAIN = 'DROVER-DNS';
/** drover's nftables table for the DNS address (family inet: both IP families). */
export const DNS_TABLE = 'drover-dns';
/** The comment on drover's hook rules. */
const COMMENT = 'drover node DNS';

/** Where the DNS server listens. */
export interface DnsEndpoint {
  /** IPv4 or IPv6 address, validated. */
  readonly address: string;
  /** UDP and TCP port, 1-65535. */
  readonly port: number;
  /** `--dns-intercept-cluster-dns`: the cluster DNS ClusterIP, of the address's family, whose port 53 is served too. */
  readonly intercept?: string;
}

/** The built-in chains that jump to {@link DNS_CHAIN}, by table. */
export const HOOKS: ReadonlyArray<readonly ['raw' | 'filter', string]> = [
  ['raw', 'PREROUTING'],
  ['raw', 'OUTPUT'],
  ['filter', 'INPUT'],
  ['filter', 'OUTPUT'],
];

/**
 * The address and port pairs of `ep` the rules match: the DNS address, and
 * the intercepted ClusterIP on port 53.
 * @throws TypeError when an address or the port is not valid, or the two
 * addresses are of different families (nothing unchecked reaches a command line).
 */
function checked(ep: DnsEndpoint): { bits: number; pairs: Array<{ ip: string; port: number }> } {
  const ip = parseIP(ep.address);
  const also = ep.intercept !== undefined ? parseIP(ep.intercept) : undefined;
  if (ip === undefined || !Number.isInteger(ep.port) || ep.port < 1 || ep.port > 65535 || (ep.intercept !== undefined && (also === undefined || also.family !== ip.family || also.text === ip.text))) {
    throw new TypeError(`DNS endpoint ${JSON.stringify(ep)}: not an IP address and a port of 1-65535 (and another address of its family to intercept)`);
  }
  const pairs = [{ ip: ip.text, port: ep.port }, ...(also !== undefined ? [{ ip: also.text, port: INTERCEPT_PORT }] : [])];
  return { bits: ip.family === 4 ? 32 : 128, pairs };
}

/**
 * The `iptables-restore --noflush` payload of {@link DNS_CHAIN} in the raw
 * and filter tables (`ip6tables-restore` for an IPv6 address): each chain
 * line flushes the chain, so the payload always leaves exactly these rules.
 */
export function iptablesPayload(ep: DnsEndpoint): string {
  const { bits, pairs } = checked(ep);
  const rules = (verdict: string) =>
    pairs.flatMap(({ ip, port }) =>
      ['udp', 'tcp'].flatMap((p) => [`-A ${DNS_CHAIN} -d ${ip}/${bits} -p ${p} -m ${p} --dport ${port} -j ${verdict}`, `-A ${DNS_CHAIN} -s ${ip}/${bits} -p ${p} -m ${p} --sport ${port} -j ${verdict}`]),
    );
  return ['*raw', `:${DNS_CHAIN} - [0:0]`, ...rules('NOTRACK'), 'COMMIT', '*filter', `:${DNS_CHAIN} - [0:0]`, ...rules('ACCEPT'), 'COMMIT', ''].join('\n');
}

/** The `nft -f` text of {@link DNS_TABLE}: created, emptied and written whole in one transaction. */
export function nftRuleset(ep: DnsEndpoint): string {
  const { bits, pairs } = checked(ep);
  const fam = bits === 32 ? 'ip' : 'ip6';
  const match = (verdict: string, dir: 'to' | 'from', ip: string, port: number) =>
    ['udp', 'tcp'].map((p) => `    ${fam} ${dir === 'to' ? 'daddr' : 'saddr'} ${ip} ${p} ${dir === 'to' ? 'dport' : 'sport'} ${port} ${verdict}`);
  const chain = (name: string, hook: string, priority: string, verdict: string) => [
    `  chain ${name} {`,
    `    type filter hook ${hook} priority ${priority}; policy accept;`,
    ...pairs.flatMap(({ ip, port }) => [...match(verdict, 'to', ip, port), ...match(verdict, 'from', ip, port)]),
    '  }',
  ];
  return [
    `table inet ${DNS_TABLE} {}`,
    `delete table inet ${DNS_TABLE}`,
    `table inet ${DNS_TABLE} {`,
    ...chain('raw-prerouting', 'prerouting', 'raw', 'notrack'),
    ...chain('raw-output', 'output', 'raw', 'notrack'),
    ...chain('input', 'input', 'filter', 'accept'),
    ...chain('output', 'output', 'filter', 'accept'),
    '}',
    '',
  ].join('\n');
}

/** `iptables-<variant>` or `ip6tables-<variant>`. */
function tool(ep: DnsEndpoint, variant: IptablesVariant): string {
  return `${ep.address.includes(':') ? 'ip6tables' : 'iptables'}-${variant}`;
}

/** Fail with the command's stderr. */
async function must(cmd: string, args: readonly string[], netns: string | undefined, input?: string): Promise<void> {
  const res = await runCommand(cmd, args, { ...(input !== undefined ? { input } : {}), ...(netns !== undefined ? { netns } : {}) });
  if (res.code !== 0) throw new Error(`DNS dataplane: ${cmd} ${args.join(' ')} failed: ${res.stderr.trim() || `exit ${res.code}`}`);
}

/**
 * Write the dataplane of `ep` in this network namespace: with `nftables`,
 * the table {@link DNS_TABLE}; else {@link DNS_CHAIN} and its four hook
 * rules with the iptables variant given (`auto`: the one the node uses,
 * exec.ts detectVariant), in `how.netns` (default: this one). Idempotent:
 * a hook rule already there is not added again.
 * @throws Error naming the command that failed.
 */
export async function programDnsDataplane(ep: DnsEndpoint, how: { readonly nftables: boolean; readonly iptables: 'auto' | IptablesVariant; readonly netns?: string }): Promise<void> {
  const { netns } = how;
  if (how.nftables) return must(NFT, ['-f', '-'], netns, nftRuleset(ep));
  const variant = how.iptables === 'auto' ? await detectVariant(netns) : how.iptables;
  const cmd = tool(ep, variant);
  await must(`${cmd}-restore`, ['--noflush', '--wait=5'], netns, iptablesPayload(ep));
  for (const [table, chain] of HOOKS) {
    const rule = [chain, '-m', 'comment', '--comment', COMMENT, '-j', DNS_CHAIN];
    const present = await runCommand(cmd, ['-w', '5', '-t', table, '-C', ...rule], netns !== undefined ? { netns } : {});
    if (present.code !== 0) await must(cmd, ['-w', '5', '-t', table, '-I', chain, '1', ...rule.slice(1)], netns);
  }
}

/**
 * Remove every form of the DNS dataplane from this network namespace, for
 * both IP families and both iptables variants: the hook rules, the chains
 * and the table, in `netns` (default: this one). What is not there is skipped.
 * @returns how many chains, rules and tables were removed.
 */
export async function removeDnsDataplane(netns?: string): Promise<{ chains: number; rules: number; tables: number }> {
  const out = { chains: 0, rules: 0, tables: 0 };
  const runCommand: typeof runIn = (cmd, args) => runIn(cmd, args, netns !== undefined ? { netns } : {});
  // The legacy tables this namespace has loaded (/proc/net/ip_tables_names): asking a legacy tool about a table
  // that is not loaded would load it, and leave legacy tables in a namespace that had none.
  const legacyTables = async (file: string): Promise<string[]> => {
    const res = await runCommand('cat', [file]).catch(() => undefined);
    return res?.code === 0 ? res.stdout.split('\n') : [];
  };
  const loaded: Readonly<Record<string, string[]>> = {
    'iptables-legacy': await legacyTables('/proc/net/ip_tables_names'),
    'ip6tables-legacy': await legacyTables('/proc/net/ip6_tables_names'),
  };
  for (const cmd of ['iptables-nft', 'iptables-legacy', 'ip6tables-nft', 'ip6tables-legacy']) {
    if (loaded[cmd] !== undefined && !loaded[cmd]!.includes('raw') && !loaded[cmd]!.includes('filter')) continue;
    const there = await runCommand(cmd, ['-w', '5', '-t', 'raw', '-S', DNS_CHAIN]).catch(() => undefined);
    const thereToo = there?.code === 0 ? there : await runCommand(cmd, ['-w', '5', '-t', 'filter', '-S', DNS_CHAIN]).catch(() => undefined);
    if (thereToo?.code !== 0) continue;
    for (const [table, chain] of HOOKS) {
      for (;;) {
        const res = await runCommand(cmd, ['-w', '5', '-t', table, '-D', chain, '-m', 'comment', '--comment', COMMENT, '-j', DNS_CHAIN]).catch(() => undefined);
        if (res?.code !== 0) break;
        out.rules++;
      }
    }
    for (const table of ['raw', 'filter']) {
      const flushed = await runCommand(cmd, ['-w', '5', '-t', table, '-F', DNS_CHAIN]).catch(() => undefined);
      if (flushed?.code !== 0) continue;
      const deleted = await runCommand(cmd, ['-w', '5', '-t', table, '-X', DNS_CHAIN]).catch(() => undefined);
      if (deleted?.code === 0) out.chains++;
    }
  }
  const table = await runCommand(NFT, ['delete', 'table', 'inet', DNS_TABLE]).catch(() => undefined);
  if (table?.code === 0) out.tables++;
  return out;
}
