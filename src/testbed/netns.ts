/** A bare network namespace for kernel tests that need no traffic. */
import { randomBytes } from 'node:crypto';
import { run } from '../kernel/exec.ts';

/** A fresh, empty network namespace named `drv-<hex>-k`; `remove()` deletes it (it never throws). */
export async function createNetns(): Promise<{ readonly name: string; remove(): Promise<void> }> {
  const name = `drv-${randomBytes(3).toString('hex')}-k`;
  await run('ip', ['netns', 'add', name]);
  return { name, remove: async () => void (await run('ip', ['netns', 'delete', name], { allowFail: true })) };
}

/**
 * Run `fn` inside a fresh, empty network namespace (see {@link createNetns}),
 * and delete the namespace afterwards, also when `fn` throws.
 */
export async function withNetns<T>(fn: (netns: string) => Promise<T>): Promise<T> {
  const ns = await createNetns();
  try {
    return await fn(ns.name);
  } finally {
    await ns.remove();
  }
}
