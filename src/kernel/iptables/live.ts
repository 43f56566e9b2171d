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

/** The `ip` arguments that list the addresses {@link localAddresses} reads. */
function addrShowArgs(family: IPFamily, dev?: string): string[] {
  return [family === 'IPv4' ? '-4' : '-6', '-o', 'addr', 'show', ...(dev !== undefined ? ['dev', dev] : []), ...(family === 'IPv6' ? ['scope', 'global'] : [])];
}

/** The addresses of `family` in `ip -o addr show` output `text`, in canonical text. */
function addressesIn(text: string, family: IPFamily): string[] {
  if (family === 'IPv4') return [...text.matchAll(/ inet ([0-9.]+)\//g)].map((m) => m[1]!).filter(isCanonicalIPv4);
  return [...text.matchAll(/ inet6 ([0-9a-fA-F:.]+)\//g)].map((m) => parseIP(m[1]!)).flatMap((a) => (a?.family === 6 ? [a.text] : []));
}

/** `ip … addr show` in `netns`, its output. @throws Error when `ip` fails. */
async function addrShow(netns: string | undefined, family: IPFamily, dev?: string): Promise<string> {
  const args = addrShowArgs(family, dev);
  const res = await runCommand('ip', args, netns ? { netns } : {});
  if (res.code !== 0) throw new Error(`ip ${args[0]} -o addr show failed: ${res.stderr.trim()}`);
  return res.stdout;
}

/**
 * The IPv4 addresses of the (namespace's) node, from `ip -4 -o addr show`;
 * with `family` IPv6, its IPv6 addresses of global scope (`ip -6 -o addr
 * show scope global`: no link-local address, which needs a zone, and no
 * ::1), in canonical text. With `dev`, only those of that link.
 * @throws Error when `ip` fails (with `dev`: also when the link does not exist).
 */
export async function localAddresses(netns?: string, family: IPFamily = 'IPv4', dev?: string): Promise<Set<string>> {
  return new Set(addressesIn(await addrShow(netns, family, dev), family));
}

/**
 * What {@link localAddresses} reads without `dev` (`all`), and of those the
 * ones on link `dev` (`onLink`; none when there is no such link), from one
 * `ip -o addr show`, whose lines name each address's link.
 * @throws Error when `ip` fails.
 */
export async function localAddressesOnLink(netns: string | undefined, family: IPFamily, dev: string): Promise<{ all: Set<string>; onLink: Set<string> }> {
  const text = await addrShow(netns, family);
  const onLink = new Set<string>();
  for (const line of text.split('\n')) {
    // "3: kube-ipvs0    inet 10.96.0.1/32 scope global kube-ipvs0 …"; a veth's name carries "@ifN".
    if (/^\d+:\s+([^\s@]+)/.exec(line)?.[1] === dev) for (const a of addressesIn(line, family)) onLink.add(a);
  }
  return { all: new Set(addressesIn(text, family)), onLink };
}
