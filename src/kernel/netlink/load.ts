/**
 * The npm package `netlink`, loaded on first use. Loading it (its native
 * binding and its families' modules) costs about 70 ms of CPU: a command
 * that never opens a netlink socket (`render`, a `diff` or `cleanup` with
 * `--netns`) does not pay it.
 */

/** The package's module. */
export type NetlinkModule = typeof import('netlink');

let loading: Promise<NetlinkModule> | undefined;

/** The `netlink` package, imported once, on the first call. */
export function loadNetlink(): Promise<NetlinkModule> {
  loading ??= import('netlink');
  return loading;
}
