/** A bare network namespace for kernel tests that need no traffic. */
import { randomBytes } from 'node:crypto';
import { run } from '../kernel/exec.ts';

/**
 * Run `fn` inside a fresh, empty network namespace named `drv-<hex>-k`, and
 * delete the namespace afterwards, also when `fn` throws.
 */
export async function withNetns<T>(fn: (netns: string) => Promise<T>): Promise<T> {
  const name = `drv-${randomBytes(3).toString('hex')}-k`;
  await run('ip', ['netns', 'add', name]);
  try {
    return await fn(name);
  } finally {
    await run('ip', ['netns', 'delete', name], { allowFail: true });
  }
}
