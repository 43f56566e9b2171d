/**
 * The static part of the iptables-mode ruleset, loaded from
 * `rules/iptables/static.rules`: drover's fixed chains (KUBE-SERVICES,
 * KUBE-MARK-MASQ, KUBE-POSTROUTING, KUBE-FORWARD) and the hook jumps from the
 * built-in chains.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BUILTIN_CHAINS, parseSave, type TableName } from './parse.ts';

/** A jump from a built-in chain into drover's chains. */
export interface HookRule {
  readonly table: TableName;
  readonly chain: string;
  readonly rule: string;
}

/** Static chains and hooks, per table. */
export interface StaticRuleset {
  /** Owned static chains and their rules, per table, in file order. */
  readonly chains: ReadonlyMap<TableName, ReadonlyMap<string, readonly string[]>>;
  /** Hook jumps in file order. */
  readonly hooks: readonly HookRule[];
}

/** Path of the static rules file shipped with drover. */
export const STATIC_RULES_PATH = fileURLToPath(new URL('../../../rules/iptables/static.rules', import.meta.url));

/**
 * Parse a static rules text.
 * @throws IptablesParseError on bad syntax; Error on a table other than filter/nat.
 */
export function parseStaticRules(text: string): StaticRuleset {
  const chains = new Map<TableName, Map<string, string[]>>();
  const hooks: HookRule[] = [];
  for (const [tableName, table] of parseSave(text)) {
    if (tableName !== 'filter' && tableName !== 'nat') throw new Error(`static rules: unsupported table ${tableName}`);
    const owned = new Map<string, string[]>();
    for (const [chain, parsed] of table) {
      if (BUILTIN_CHAINS.has(chain)) {
        for (const rule of parsed.rules) hooks.push({ table: tableName, chain, rule });
      } else {
        owned.set(chain, parsed.rules);
      }
    }
    chains.set(tableName, owned);
  }
  return { chains, hooks };
}

let cached: StaticRuleset | undefined;

/** The shipped static ruleset (read once). */
export function loadStaticRules(): StaticRuleset {
  cached ??= parseStaticRules(readFileSync(STATIC_RULES_PATH, 'utf8'));
  return cached;
}
