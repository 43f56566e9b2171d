/**
 * For the measuring scripts that act through netlink (a netlink socket acts
 * on the network namespace of its process): run this script again inside a
 * throw-away network namespace of its own, removed at the end, also on
 * failure, and exit with its exit code. Inside it, return at once.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

/**
 * Re-run the script at `scriptUrl` (its import.meta.url) with the same arguments inside a new namespace `drv-<hex>-<tag>`,
 * unless the environment variable `marker` says it runs there already (then return). Root only.
 */
export function inOwnNetns(scriptUrl: string, marker: string, tag: string): void {
  if (process.env[marker] !== undefined) return;
  const netns = `drv-${randomBytes(3).toString('hex')}-${tag}`;
  spawnSync('ip', ['netns', 'add', netns], { stdio: 'inherit' });
  let code = 1;
  try {
    const res = spawnSync('ip', ['netns', 'exec', netns, process.execPath, '--import', 'tsx', fileURLToPath(scriptUrl), ...process.argv.slice(2)], {
      stdio: 'inherit',
      env: { ...process.env, [marker]: netns },
    });
    code = res.status ?? 1;
  } finally {
    spawnSync('ip', ['netns', 'delete', netns], { stdio: 'inherit' });
  }
  process.exit(code);
}
