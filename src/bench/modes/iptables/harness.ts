/**
 * iptables mode for `drover bench`: drover's IptablesBackend, a read-back
 * with `iptables-save -t nat`, and three baselines built by hand
 * (payloads.ts): the minimal change, the kube-proxy-style partial
 * restore and the full re-render. Everything runs inside one network
 * namespace.
 */
import { IptablesBackend } from '../../../modes/iptables/backend.ts';
import { canonicalRule } from '../../../kernel/iptables/canonical.ts';
import { SystemIptables, type IptablesExec, type IptablesVariant } from '../../../kernel/iptables/exec.ts';
import { renderServicePort } from '../../../modes/iptables/render.ts';
import { sharedRule, type ServiceRules } from '../../../modes/shared/kube-chains/service-rules.ts';
import type { RenderOptions } from '../../../config/render.ts';
import { SERVICES_CHAIN } from '../../../modes/shared/kube-chains/ruleset.ts';
import { loadStaticRules } from '../../../modes/shared/kube-chains/static.ts';
import type { ServicePort, Snapshot } from '../../../model/types.ts';
import { silentLogger } from '../../../util/log.ts';
import { totalOf } from '../../../proxier/backend.ts';
import type { BenchChange, ServiceChange } from '../../changes.ts';
import type { Baseline, ModeHarness } from '../../harness.ts';
import { fullRerenderPayload, kubeProxyPayload, minimalPayload } from './payloads.ts';

/** Options of {@link iptablesHarness}. */
export interface IptablesHarnessOptions {
  /** The network namespace to program (never the host's). */
  readonly netns: string;
  readonly variant: IptablesVariant;
  readonly render: RenderOptions;
  /** Timeout of one iptables command, ms (default 900 000: a full re-render at 5,000 services takes minutes on iptables-nft). */
  readonly timeoutMs?: number;
  /** The iptables I/O; default: the real iptables-<variant> commands in `netns` (tests pass a FakeIptables). */
  readonly exec?: IptablesExec;
}

/** The nat chains of interest as a read-back has them, and the KUBE-SERVICES rules. */
interface NatIndex {
  readonly declared: Set<string>;
  readonly rules: Map<string, string[]>;
  readonly services: Set<string>;
}

/** Index `iptables-save -t nat` output, keeping the rules of `chains` (all chains when undefined). */
function indexNat(text: string, chains?: ReadonlySet<string>): NatIndex {
  const declared = new Set<string>();
  const rules = new Map<string, string[]>();
  const services = new Set<string>();
  for (const line of text.split('\n')) {
    if (line.startsWith(':')) {
      declared.add(line.slice(1, line.indexOf(' ')));
    } else if (line.startsWith('-A ')) {
      const space = line.indexOf(' ', 3);
      const chain = line.slice(3, space);
      const rule = line.slice(space + 1);
      if (chain === SERVICES_CHAIN) services.add(rule);
      else if (!chains || chains.has(chain)) {
        const list = rules.get(chain);
        if (list) list.push(rule);
        else rules.set(chain, [rule]);
      }
    }
  }
  return { declared, rules, services };
}

/** True when `index` holds `s` exactly: every chain with its rules, and its KUBE-SERVICES jump. */
function holds(index: NatIndex, s: ServiceRules): boolean {
  for (const [chain, rules] of s.chains) {
    const have = index.rules.get(chain) ?? [];
    if (!index.declared.has(chain) || have.length !== rules.length) return false;
    if (!rules.every((r, i) => canonicalRule(r) === have[i])) return false;
  }
  const jump = sharedRule(s, 'nat');
  return jump === undefined || index.services.has(jump);
}

/** iptables mode's harness; see the module comment. */
export function iptablesHarness(opts: IptablesHarnessOptions): ModeHarness<string> {
  const exec = opts.exec ?? new SystemIptables({ variant: opts.variant, netns: opts.netns, timeoutMs: opts.timeoutMs ?? 900_000 });
  const backend = new IptablesBackend({ exec, render: opts.render, logger: silentLogger() });
  const statics = loadStaticRules();
  const cache = new WeakMap<ServicePort, ServiceRules>();
  const render = (sp: ServicePort | undefined): ServiceRules | undefined => {
    if (!sp) return undefined;
    let r = cache.get(sp);
    if (!r) cache.set(sp, (r = renderServicePort(sp, opts.render)));
    return r;
  };
  const all = (snapshot: Snapshot): ServiceRules[] => [...snapshot.services.values()].map((sp) => render(sp)!);
  const baseline = (method: Baseline['method'], build: (c: BenchChange) => string): Baseline => ({
    method,
    prepare(change) {
      const payload = build(change);
      return { bytes: Buffer.byteLength(payload), apply: () => exec.restore(payload) };
    },
  });

  return {
    mode: 'iptables',
    variant: opts.variant,
    backend,
    // iptables-nft commits through nf_tables batches, which the kernel announces; iptables-legacy replaces whole tables silently.
    kernelNotifications: opts.variant === 'nft',
    readBack: () => exec.save('nat'),
    wroteNothing: (r) => totalOf(r.written) + totalOf(r.deleted) === 0,
    close: () => undefined,
    shows(state: string, change: ServiceChange): boolean {
      const after = render(change.after);
      const before = render(change.before);
      const index = indexNat(state, new Set([...(after?.chains.keys() ?? []), ...(before?.chains.keys() ?? [])]));
      if (after && !holds(index, after)) return false;
      for (const chain of before?.chains.keys() ?? []) if (!after?.chains.has(chain) && index.declared.has(chain)) return false;
      const was = before && sharedRule(before, 'nat');
      return !(was !== undefined && was !== (after && sharedRule(after, 'nat')) && index.services.has(was));
    },
    showsAll(state: string, snapshot: Snapshot): boolean {
      const index = indexNat(state);
      return all(snapshot).every((s) => holds(index, s));
    },
    raw: baseline('raw', (c) => minimalPayload(render(c.before), render(c.after))),
    perChange: [baseline('kube-proxy', (c) => kubeProxyPayload(statics, all(c.to), render(c.before), render(c.after)))],
    whole: baseline('full-rerender', (c) => fullRerenderPayload(statics, all(c.to), render(c.before), render(c.after))),
  };
}
