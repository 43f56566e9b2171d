/**
 * The helper program that runs one nfacct request in the network namespace
 * it runs in (netns.ts starts it with `ip netns exec`, since a netlink
 * socket acts in the namespace of the process that opens it).
 *
 * argv: `ensure NAME…`, `get NAME` or `list`. stdout: one JSON line, `{"ok":
 * RESULT}` (for ensure an object of each name's error message or null, an
 * NfacctCounter for get, an array for list)
 * or `{"error": {"message": M, "code": C}}` (C: the errno name, "ENOENT" for
 * an object that does not exist), exit status 0 either way; names are
 * checked (codec.ts checkCounterName) before a socket is opened.
 */
import { fileURLToPath } from 'node:url';
import { NfacctError } from '../../errors.ts';
import { NetlinkNfacct } from './client.ts';
import { checkCounterName } from './codec.ts';
import type { Nfacct } from './types.ts';

/** One request of the helper, from its argv. */
export type HelperRequest = { readonly op: 'ensure'; readonly names: readonly string[] } | { readonly op: 'get'; readonly name: string } | { readonly op: 'list' };

/**
 * The request of argv `args` (without node and the script).
 * @throws Error for an unknown operation; NfacctNameError for a refused name.
 */
export function parseHelperArgs(args: readonly string[]): HelperRequest {
  const [op, name] = args;
  if (op === 'ensure' && args.length >= 2) return { op, names: args.slice(1).map(checkCounterName) };
  if (op === 'get' && args.length === 2) return { op, name: checkCounterName(name) };
  if (op === 'list' && args.length === 1) return { op };
  throw new Error(`nfacct helper: expected "ensure NAME…", "get NAME" or "list", got ${JSON.stringify(args)}`);
}

/** Run `req` on `nfacct`; the JSON line the helper prints. */
export async function answer(nfacct: Nfacct, req: HelperRequest): Promise<string> {
  try {
    const ok =
      req.op === 'ensure'
        ? Object.fromEntries([...(await nfacct.ensureEach(req.names))].map(([n, err]) => [n, err === undefined ? null : { message: err.message, ...(err instanceof NfacctError && err.code !== undefined ? { code: err.code } : {}) }]))
        : req.op === 'get'
          ? await nfacct.get(req.name)
          : await nfacct.list();
    return JSON.stringify({ ok });
  } catch (err) {
    return JSON.stringify({ error: { message: (err as Error).message, ...(err instanceof NfacctError && err.code !== undefined ? { code: err.code } : {}) } });
  }
}

// Run as a program (not when a test imports it).
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const nfacct = new NetlinkNfacct();
  answer(nfacct, parseHelperArgs(process.argv.slice(2)))
    .then((line) => {
      nfacct.close();
      process.stdout.write(`${line}\n`);
    })
    .catch((err: Error) => {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 1;
    });
}
