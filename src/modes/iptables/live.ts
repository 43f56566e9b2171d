/** Reading the live kernel state that the inspect commands work on. */
import { isCanonicalIPv4 } from '../../model/addr.ts';
import { runCommand } from '../shared/exec.ts';
import type { IptablesExec } from './exec.ts';
import { parseSave, TABLES, type ParsedDump } from './parse.ts';

/**
 * The live filter and nat tables, each parsed on its own so that a rule's
 * line number is its line in `iptables-save -t TABLE`.
 */
export async function readTables(exec: IptablesExec): Promise<ParsedDump> {
  const dump: ParsedDump = new Map();
  for (const table of TABLES) {
    const parsed = parseSave(await exec.save(table)).get(table);
    if (parsed) dump.set(table, parsed);
  }
  return dump;
}

/** The IPv4 addresses of the (namespace's) node, from `ip -4 -o addr show`. */
export async function localAddresses(netns?: string): Promise<Set<string>> {
  const res = await runCommand('ip', ['-4', '-o', 'addr', 'show'], netns ? { netns } : {});
  if (res.code !== 0) throw new Error(`ip -4 -o addr show failed: ${res.stderr.trim()}`);
  return new Set([...res.stdout.matchAll(/ inet ([0-9.]+)\//g)].map((m) => m[1]!).filter(isCanonicalIPv4));
}

