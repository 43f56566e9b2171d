/** ClientIP affinity in kernel tests: whether a client keeps its endpoint, and moves once its affinity timed out. */
import { probe, type ProbeSummary } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';

/**
 * The endpoints one client reaches in up to `rounds` single connections
 * from namespace `from` to `host:port`, each after waiting `waitMs` (more
 * than the affinity timeout), stopping at two: with affinity that lets go,
 * the client moves. 8 rounds all on one of 3 endpoints has odds 1 in 2187.
 */
export async function endpointsAfterTimeouts(topo: Topology, from: string, host: string, port: number, waitMs = 2500, rounds = 8): Promise<Set<string>> {
  const seen = new Set<string>();
  for (let round = 0; round < rounds && seen.size < 2; round++) {
    await new Promise((r) => setTimeout(r, waitMs));
    const one = await probe(topo, { from, host, port, count: 1 });
    for (const name of Object.keys(one.counts)) seen.add(name);
  }
  return seen;
}

/** The longest time between two connections in a row of `runs`, one run after the other, as the kernel saw their SYNs at most (ProbeSummary.longestGapMs), ms. */
function longestGap(runs: readonly ProbeSummary[]): number {
  return Math.max(...runs.map((r, i) => Math.max(r.longestGapMs, i === 0 ? 0 : r.firstConnectedMs - runs[i - 1]!.lastSentMs)));
}

/**
 * Whether the connections of `runs`, one run after the other, each reached
 * the kernel less than `windowMs` after the one before: only then does an
 * affinity of a longer timeout hold over all of them. A busy machine can
 * stall a process, or the start of the next run's process, for longer.
 */
export function withinWindow(runs: readonly ProbeSummary[], windowMs: number): boolean {
  return longestGap(runs) < windowMs;
}

/**
 * What one client got through each of `frontends` (15 connections each, one
 * frontend after the other), and {@link endpointsAfterTimeouts} through the
 * first. The connections of `each` all reached the kernel less than
 * `windowMs` (the affinity timeout less a margin) after the one before, as
 * {@link withinWindow} bounds it: a try where the machine stalled longer is
 * made again, up to 5 tries.
 * @throws Error when no try kept within the window.
 */
export async function affinityRun(
  topo: Topology,
  from: string,
  frontends: ReadonlyArray<{ readonly host: string; readonly port: number }>,
  windowMs = 1500,
): Promise<{ readonly each: ProbeSummary[]; readonly after: Set<string> }> {
  const gaps: number[] = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    const each: ProbeSummary[] = [];
    for (const f of frontends) each.push(await probe(topo, { from, host: f.host, port: f.port, count: 15 }));
    if (withinWindow(each, windowMs)) return { each, after: await endpointsAfterTimeouts(topo, from, frontends[0]!.host, frontends[0]!.port) };
    gaps.push(longestGap(each));
    // Let the affinity of this try expire, so that the next one starts afresh.
    await new Promise((r) => setTimeout(r, windowMs + 1000));
  }
  throw new Error(`no try of the affinity run kept its connections less than ${windowMs} ms apart (longest gaps ${gaps.join(', ')} ms)`);
}
