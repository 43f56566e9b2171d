/**
 * The identity of a network namespace: the st_dev and inode of its nsfs
 * file, which namespaces(7) says identify a namespace together (the inode
 * alone is only unique within one device). A namespace made again under the
 * same name has another identity; an identity is only meaningful while the
 * system runs (inode numbers are reused after a namespace goes, and after a
 * reboot).
 */
import { stat } from 'node:fs/promises';

/** See the module comment. */
export interface NamespaceIdentity {
  /** st_dev of the namespace file. */
  readonly dev: number;
  /** Its inode (the namespace's number, as `ls -L -i /proc/self/ns/net` shows it). */
  readonly inode: number;
}

/** The file that stands for namespace `netns`: `/run/netns/NAME` (as `ip netns` keeps them), or `/proc/self/ns/net` (the process's own) when undefined. */
export function namespaceFile(netns: string | undefined): string {
  return netns === undefined ? '/proc/self/ns/net' : `/run/netns/${netns}`;
}

/**
 * The identity of namespace `netns` (see {@link namespaceFile}).
 * @throws Error (ENOENT) when the namespace file is missing.
 */
export async function namespaceIdentity(netns: string | undefined): Promise<NamespaceIdentity> {
  const st = await stat(namespaceFile(netns));
  return { dev: st.dev, inode: st.ino };
}
