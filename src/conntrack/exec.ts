/**
 * Deleting conntrack entries with the `conntrack` tool (conntrack-tools),
 * spawned with an argument array, optionally inside a network namespace.
 */
import { runCommand } from '../modes/shared/exec.ts';
import type { StaleFlow } from './stale.ts';

/** The conntrack I/O; a fake records calls in tests. */
export interface ConntrackExec {
  /**
   * Delete the UDP entries matching `flow`.
   * @returns the number of entries deleted.
   * @throws Error when conntrack fails for another reason than "nothing matched".
   */
  deleteUDP(flow: StaleFlow): Promise<number>;
}

/** The arguments of `conntrack -D` for one stale flow (conntrack(8)). */
export function conntrackDeleteArgs(flow: StaleFlow): string[] {
  return [
    '-D',
    '-p',
    'udp',
    ...(flow.ip ? ['--orig-dst', flow.ip] : []),
    '--orig-port-dst',
    String(flow.port),
    ...(flow.endpointIP ? ['--dst-nat', flow.endpointIP] : []),
  ];
}

/** The real conntrack tool. */
export class SystemConntrack implements ConntrackExec {
  constructor(private readonly netns?: string) {}

  async deleteUDP(flow: StaleFlow): Promise<number> {
    const res = await runCommand('conntrack', conntrackDeleteArgs(flow), this.netns ? { netns: this.netns } : {});
    const deleted = /(\d+) flow entries have been deleted/.exec(res.stderr);
    // conntrack exits 1 when nothing matched; that is not an error here.
    if (deleted) return Number(deleted[1]);
    throw new Error(`conntrack ${conntrackDeleteArgs(flow).join(' ')} failed (${res.code}): ${res.stderr.trim()}`);
  }
}
