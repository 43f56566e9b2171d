/** Checks shared by the end-to-end `drover bench` tests (host and guest). */
import type { ExecutionContext } from 'ava';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BenchSettings, Sample } from '../../src/bench/types.ts';

/** The samples of a run's samples.jsonl in `dir`. */
export async function readSamples(dir: string): Promise<Sample[]> {
  return (await readFile(join(dir, 'samples.jsonl'), 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as Sample);
}

/**
 * Assert that `samples` (of one mode and size) hold exactly what a run with
 * `changes` changes of each kind takes: per kind drover on four clocks
 * (agent, end to end, kernel, data path) and raw and kube-proxy-style on the
 * agent clock, `changes` each; the full sync on three clocks (not end to
 * end); one full re-render on "service added". `extra`: the mode's other
 * per-change baselines (nftables mode: `minimal-script`), also `changes` each.
 * `fromEmpty`: the mode has a full sync baseline (nftables mode: `nft -f` of
 * the whole ruleset), timed on the agent and kernel clocks.
 */
export function assertSampleCounts(t: ExecutionContext, samples: readonly Sample[], changes: number, extra: readonly string[] = [], fromEmpty = false): void {
  const count = (kind: string, method: string, clock: string) => samples.filter((s) => s.kind === kind && s.method === method && s.clock === clock).length;
  t.is(samples.length, 4 * (4 * changes + (2 + extra.length) * changes) + 3 + 1 + (fromEmpty ? 2 : 0));
  for (const clock of ['agent', 'kernel']) t.is(count('full-sync', 'full-rerender', clock), fromEmpty ? 1 : 0, `full sync baseline ${clock}`);
  for (const kind of ['endpoint-removed', 'endpoint-added', 'service-added', 'service-removed']) {
    for (const clock of ['agent', 'end-to-end', 'kernel', 'datapath']) t.is(count(kind, 'drover', clock), changes, `${kind} drover ${clock}`);
    t.is(count(kind, 'raw', 'agent'), changes, `${kind} raw`);
    t.is(count(kind, 'kube-proxy', 'agent'), changes, `${kind} kube-proxy`);
    for (const m of extra) t.is(count(kind, m, 'agent'), changes, `${kind} ${m}`);
  }
  for (const clock of ['agent', 'kernel', 'datapath']) t.is(count('full-sync', 'drover', clock), 1, `full sync ${clock}`);
  t.is(count('full-sync', 'drover', 'end-to-end'), 0, 'the end-to-end clock times single changes only');
  t.is(count('service-added', 'full-rerender', 'agent'), 1);
  t.true(samples.every((s) => Number.isFinite(s.ms) && s.ms > 0));
}

/** The settings of a one-size iptables run with 4 changes of each kind, for report tests. */
export const SETTINGS: BenchSettings = {
  modes: ['iptables'],
  services: [100],
  endpoints: 10,
  changes: 4,
  iptablesVariant: 'nft',
  fullBaselineMax: 1000,
  detailMax: 100_000,
  fullBaselineRepeats: 1,
  removalConfirm: 10,
  failConfirm: 3,
  clockServices: 4,
};
