/** Reading the live kernel state that the inspect commands work on. */
import { isCanonicalIPv4, parseIP } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import { runCommand } from '../exec.ts';
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

/**
 * The IPv4 addresses of the (namespace's) node, from `ip -4 -o addr show`;
 * with `family` IPv6, its IPv6 addresses of global scope (`ip -6 -o addr
 * show scope global`: no link-local address, which needs a zone, and no
 * ::1), in canonical text. With `dev`, only those of that link.
 * @throws Error when `ip` fails (with `dev`: also when the link does not exist).
 */
export async function localAddresses(netns?: string, family: IPFamily = 'IPv4', dev?: string): Promise<Set<string>> {
  const v = family === 'IPv4' ? '-4' : '-6';
  const res = await runCommand('ip', [v, '-o', 'addr', 'show', ...(dev !== undefined ? ['dev', dev] : []), ...(family === 'IPv6' ? ['scope', 'global'] : [])], netns ? { netns } : {});
  if (res.code !== 0) throw new Error(`ip ${v} -o addr show failed: ${res.stderr.trim()}`);
  if (family === 'IPv4') return new Set([...res.stdout.matchAll(/ inet ([0-9.]+)\//g)].map((m) => m[1]!).filter(isCanonicalIPv4));
  return new Set([...res.stdout.matchAll(/ inet6 ([0-9a-fA-F:.]+)\//g)].map((m) => parseIP(m[1]!)).flatMap((a) => (a?.family === 6 ? [a.text] : [])));
}

