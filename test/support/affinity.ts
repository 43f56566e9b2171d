/** ClientIP affinity in kernel tests: whether a client moves once its affinity timed out. */
import { probe } from '../../src/testbed/probe.ts';
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

/** What one client got through each of `frontends` (15 connections each), and {@link endpointsAfterTimeouts} through the first. */
export async function affinityRun(topo: Topology, from: string, frontends: ReadonlyArray<{ readonly host: string; readonly port: number }>): Promise<{ readonly each: Array<Awaited<ReturnType<typeof probe>>>; readonly after: Set<string> }> {
  const each = [];
  for (const f of frontends) each.push(await probe(topo, { from, host: f.host, port: f.port, count: 15 }));
  return { each, after: await endpointsAfterTimeouts(topo, from, frontends[0]!.host, frontends[0]!.port) };
}
