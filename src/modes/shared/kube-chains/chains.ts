/**
 * The rules each service port owns in the live kernel, found from the rules
 * themselves (never from drover's memory), so that it works on rules written
 * by kube-proxy as well as by drover:
 *
 * - the rules of the shared chains (nat KUBE-SERVICES and KUBE-NODEPORTS;
 *   filter KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-PROXY-FIREWALL and
 *   KUBE-NODEPORTS) whose kube-proxy comment names the service port ("…
 *   cluster IP", "… external IP", "… loadbalancer IP", "… has no
 *   endpoints", "… has no local endpoints", …; see render.ts) are its
 *   entries;
 * - the chains they jump to, and the chains those jump to, are the service
 *   port's KUBE-EXT, KUBE-FW, KUBE-SVC, KUBE-SVL and KUBE-SEP chains. Only
 *   per-service chains are followed (`isServiceChain`), not the shared
 *   KUBE-MARK-MASQ;
 * - a KUBE-SEP chain's endpoint is its DNAT `--to-destination` (older
 *   kube-proxy versions do not name the endpoint in a comment).
 */
import { commentServicePort, isServiceChain } from './names.ts';
import { TABLES, type ParsedDump, type ShownTable, type TableName } from '../../../kernel/iptables/parse.ts';
import { SET_CHAINS } from './ruleset.ts';
import { parseRule } from '../../../kernel/iptables/rule.ts';
import { DroverError } from '../../../errors.ts';
import { endpointPodKey } from '../../../model/pods.ts';


/** One chain, or the rules of one service port in KUBE-SERVICES, as the kernel has them. */
export interface ServiceChain {
  /** The table; "nat (IPv6)" for a chain of the IPv6 ruleset. */
  readonly table: ShownTable;
  readonly chain: string;
  /** The endpoint "ip:port" a KUBE-SEP chain DNATs to; null for other chains. */
  readonly endpoint: string | null;
  /** With `--source`: the Pod ("namespace/name") the endpoint was derived from; absent otherwise. */
  readonly pod?: string;
  /**
   * Rules in iptables-save syntax, `-A CHAIN ...`. For KUBE-SERVICES only
   * the rules of this service port.
   */
  readonly rules: readonly string[];
}

/**
 * Everything one service port owns in the kernel. This is also the `--json`
 * shape of `drover chains` (an array of these, sorted by `servicePort`).
 */
export interface ServicePortChains {
  /** ServicePortName, "namespace/name:port" ("namespace/name" for an unnamed port). */
  readonly servicePort: string;
  /**
   * In order: its nat shared-chain entries (KUBE-SERVICES, KUBE-NODEPORTS),
   * the chains they lead to depth-first (KUBE-EXT, KUBE-FW, KUBE-SVC,
   * KUBE-SVL, KUBE-SEP in jump order), then its filter entries (the REJECT
   * of a service port with no endpoints, the DROP of one with no local
   * endpoints, firewall DROPs, the health check ACCEPT).
   */
  readonly chains: readonly ServiceChain[];
}

/** What the inspect commands need of a rule: its comment, jump and DNAT destination. */
interface RuleFacts {
  readonly comment: string | undefined;
  /** The chain `-j` jumps to, when it is one of the table's user chains. */
  readonly jump: string | undefined;
  /** "ip:port" (or "ip") of a DNAT target. */
  readonly dnat: string | undefined;
}

/**
 * The comment, jump and DNAT destination of a rule (parsed by rule.ts).
 * @param chains the table's user chains (a `-j` to one of them is a jump).
 * @throws RuleSyntaxError on unbalanced quotes or an option without its value.
 */
function ruleFacts(rule: string, chains: ReadonlySet<string>): RuleFacts {
  const parsed = parseRule('', rule, chains);
  const comment = parsed.matches.find((m) => m.kind === 'comment');
  const t = parsed.target;
  return {
    comment: comment?.kind === 'comment' ? comment.text : undefined,
    jump: t.kind === 'jump' ? t.chain : undefined,
    dnat: t.kind === 'DNAT' ? (t.port === undefined ? t.ip : `${t.ip}:${t.port}`) : undefined,
  };
}

/**
 * The label of a chain, from its own rules: "ns/svc:port -> ip:port" for a
 * KUBE-SEP chain (the DNAT destination), "ns/svc:port" for a KUBE-SVC chain,
 * undefined when no rule's comment names a service port.
 * @param rules rules without the leading `-A CHAIN `.
 * @throws RuleSyntaxError on a rule that cannot be parsed.
 */
export function chainLabel(rules: readonly string[]): string | undefined {
  const facts = rules.map((r) => ruleFacts(r, new Set()));
  const key = facts.map((f) => commentServicePort(f.comment ?? '')).find((k) => k !== undefined);
  if (!key) return undefined;
  const endpoint = facts.find((f) => f.dnat !== undefined)?.dnat;
  return endpoint ? `${key} -> ${endpoint}` : key;
}

/**
 * The service port a rule of a shared chain (ruleset.ts SET_CHAINS) is an
 * entry of, from kube-proxy's comments: "… cluster IP", "… external IP",
 * "… loadbalancer IP" (nat KUBE-SERVICES), the bare service port (nat
 * KUBE-NODEPORTS), "… has no endpoints" or "… has no local endpoints"
 * (filter KUBE-SERVICES, KUBE-EXTERNAL-SERVICES), "… traffic not accepted
 * by KUBE-FW-…" (filter KUBE-PROXY-FIREWALL), "… health check node port"
 * (filter KUBE-NODEPORTS).
 */
function entryServicePort(comment: string | undefined): string | undefined {
  return /^([^\s/]+\/[^\s/]+)(?: (?:cluster IP|external IP|loadbalancer IP|has no endpoints|has no local endpoints|traffic not accepted by KUBE-FW-[A-Z2-7]{16}|health check node port))?$/.exec(
    comment ?? '',
  )?.[1];
}

/**
 * Every service port that has an entry in nat or filter KUBE-SERVICES of
 * `dump`, with its chains; sorted by service port name.
 * @throws RuleSyntaxError on a rule that cannot be parsed (unbalanced quotes).
 */
export function serviceChains(dump: ParsedDump): ServicePortChains[] {
  const found = new Map<string, ServiceChain[]>();
  for (const table of TABLES) {
    const chains = dump.get(table);
    if (!chains) continue;
    const names = new Set(chains.keys());
    // Per service port, its entries in each shared chain, in SET_CHAINS order.
    const entries = new Map<string, Map<string, string[]>>();
    for (const shared of SET_CHAINS[table]) {
      for (const rule of chains.get(shared)?.rules ?? []) {
        const key = entryServicePort(ruleFacts(rule, names).comment);
        if (!key) continue;
        const byChain = entries.get(key) ?? new Map<string, string[]>();
        entries.set(key, byChain);
        byChain.set(shared, [...(byChain.get(shared) ?? []), rule]);
      }
    }
    for (const [key, byChain] of entries) {
      const list = found.get(key) ?? [];
      found.set(key, list);
      const rules = [...byChain.values()].flat();
      for (const [shared, own] of byChain) list.push({ table, chain: shared, endpoint: null, rules: own.map((r) => `-A ${shared} ${r}`) });
      // Depth-first from the entry's jumps, each owned chain once, in jump order.
      const seen = new Set<string>();
      const visit = (rule: string): void => {
        const target = ruleFacts(rule, names).jump;
        if (target === undefined || seen.has(target) || !isServiceChain(target)) return;
        seen.add(target);
        const targetRules = chains.get(target)!.rules;
        const endpoint = target.startsWith('KUBE-SEP-') ? (targetRules.map((r) => ruleFacts(r, names).dnat).find((d) => d) ?? null) : null;
        list.push({ table, chain: target, endpoint, rules: targetRules.map((r) => `-A ${target} ${r}`) });
        targetRules.forEach(visit);
      };
      rules.forEach(visit);
    }
  }
  return [...found.keys()].sort().map((servicePort) => ({ servicePort, chains: found.get(servicePort)! }));
}

/** Thrown when a `NAMESPACE/NAME[:PORT]` selector is malformed or matches nothing. */
export class UnknownServiceError extends DroverError {
  override name = 'UnknownServiceError';
}

/**
 * The service ports `selector` names: "ns/name:port" exactly, or every port
 * of "ns/name" (and its unnamed port). Undefined selects everything. Entries
 * without a service port (null: IPVS virtual servers not in the source) are
 * never selected by name.
 * @param where where the service ports were looked for, for the error
 * @throws UnknownServiceError when the selector is malformed or matches no service port.
 */
export function selectServicePorts<T extends { readonly servicePort: string | null }>(
  all: readonly T[],
  selector?: string,
  where = "in the kernel's KUBE-SERVICES chains",
): T[] {
  if (selector === undefined) return [...all];
  if (!/^[^/\s:]+\/[^/\s:]+(:[^/\s:]+)?$/.test(selector)) {
    throw new UnknownServiceError(`"${selector}" is not NAMESPACE/NAME or NAMESPACE/NAME:PORT`);
  }
  const picked = all.filter(
    (s) => s.servicePort !== null && (s.servicePort === selector || (!selector.includes(':') && s.servicePort.startsWith(`${selector}:`))),
  );
  if (picked.length === 0) throw new UnknownServiceError(`no rules for service ${selector} ${where}`);
  return picked;
}

/**
 * `list` with the Pod of each KUBE-SEP chain's endpoint, from `pods`
 * (model/pods.ts endpointPods of the `--source` snapshot). Chains whose
 * endpoint no Pod gave are unchanged.
 */
export function withPods(list: readonly ServicePortChains[], pods: ReadonlyMap<string, string>): ServicePortChains[] {
  return list.map((sp) => ({
    ...sp,
    chains: sp.chains.map((c) => {
      const pod = c.endpoint === null ? undefined : pods.get(endpointPodKey(sp.servicePort, c.endpoint));
      return pod === undefined ? c : { ...c, pod };
    }),
  }));
}

/**
 * The text `drover chains` prints: per service port, each chain under a
 * header line `# <service port>[ -> <endpoint>] (<table> <chain>)[, Pod
 * <namespace/name>]`, then its rules as iptables-save prints them; a blank
 * line between service ports. An empty list prints "no service rules in
 * the kernel".
 */
export function formatChains(list: readonly ServicePortChains[]): string {
  if (list.length === 0) return 'no service rules in the kernel\n';
  const blocks = list.map((sp) =>
    sp.chains
      .flatMap((c) => [`# ${sp.servicePort}${c.endpoint ? ` -> ${c.endpoint}` : ''} (${c.table} ${c.chain})${c.pod ? `, Pod ${c.pod}` : ''}`, ...c.rules])
      .join('\n'),
  );
  return `${blocks.join('\n\n')}\n`;
}
