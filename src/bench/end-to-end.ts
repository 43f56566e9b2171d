/**
 * The end-to-end clock of `drover bench`: the same single changes as the
 * agent clock, made to the manifest files that a real `drover run` process
 * watches (manifest-files.ts, drover-process.ts), each timed from just
 * before the file is written (or removed) until a read-back of the kernel
 * shows the change. It covers what the agent clock leaves out: the file
 * watch and its debounce, reading and normalising the changed file,
 * building the desired state, and the process's own scheduling.
 *
 * The read-backs start once `drover run` logged the next sync done, and run
 * back to back until one shows the change, so that they do not compete with
 * drover for the CPU while it works; the time is when the first read-back
 * that shows the change was parsed, as on the kernel clock.
 *
 * The process's memory is read from /proc/PID/status: VmRSS a few seconds
 * after the first sync is logged, once it has collected that sync's garbage
 * (drover-process.ts STEADY_AFTER_MS), and after each change, VmHWM (the peak) after the last change.
 */
import { mkdir, mkdtemp, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProxyMode } from '../proxier/backend.ts';
import type { Snapshot } from '../model/types.ts';
import type { BenchChange } from './changes.ts';
import { droverEntry, DroverRunProcess, steadyMemory } from './drover-process.ts';
import type { ModeHarness } from './harness.ts';
import { manifestText, ownFileName, sourceFiles } from './manifest-files.ts';
import { BENCH_CLUSTER_CIDR } from './synth.ts';
import type { ChangeKind, DroverRunFacts, Sample } from './types.ts';
import { msSince, nowNs, round3 } from './timing.ts';

/** What {@link measureEndToEnd} needs besides the harness. */
export interface EndToEndOptions {
  readonly mode: ProxyMode;
  /** The node namespace `drover run` programs. */
  readonly netns: string;
  readonly iptablesVariant: string;
  /** The starting state; the kernel may already hold it (drover run adopts it). */
  readonly base: Snapshot;
  /** Service port keys that get a file of their own (the clock services). */
  readonly ownKeys: readonly string[];
  /** The changes to time, in order; each pair must put the state back. */
  readonly changes: ReadonlyArray<{ readonly iteration: number; readonly change: BenchChange }>;
  /** Give up on the first sync, or on a change reaching the kernel, after this long, ms. */
  readonly deadlineMs: number;
}

/** One end-to-end measurement: its change, the time and the read-backs made. */
export type EndToEndSample = Pick<Sample, 'iteration' | 'ms' | 'tries' | 'readbackMs' | 'rssKb'> & { readonly kind: ChangeKind };

/** Write `text` to `dir`/`name` as an editor or a deploy tool would: a hidden temporary file in the same folder, renamed over it. */
async function replaceFile(dir: string, name: string, text: string): Promise<void> {
  const tmp = join(dir, `.${name}.tmp`);
  await writeFile(tmp, text);
  await rename(tmp, join(dir, name));
}

/**
 * Time `opts.changes` through a real `drover run`; see the module comment.
 * Each sample goes to `record` as it is taken. The manifest folder is
 * removed and the process stopped (its rules left in place) at the end,
 * also on failure.
 * @throws Error when drover run exits, logs no sync, or the kernel does not show a change within `deadlineMs`.
 */
export async function measureEndToEnd<S>(h: ModeHarness<S>, opts: EndToEndOptions, record: (sample: EndToEndSample) => void): Promise<DroverRunFacts> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-bench-e2e-'));
  const source = join(dir, 'manifests');
  let proc: DroverRunProcess | undefined;
  try {
    const own = opts.ownKeys.map((k) => {
      const p = opts.base.services.get(k);
      if (!p) throw new Error(`end-to-end clock: the starting state has no ${k}`);
      return p;
    });
    await mkdir(source);
    for (const [name, text] of sourceFiles(opts.base.services.values(), own)) await writeFile(join(source, name), text);

    const started = nowNs();
    proc = await DroverRunProcess.start({ netns: opts.netns, mode: opts.mode, iptablesVariant: opts.iptablesVariant, source, clusterCIDR: BENCH_CLUSTER_CIDR, workDir: dir });
    await proc.syncAfter(0, opts.deadlineMs);
    const firstSyncMs = round3(msSince(started));
    const { rssKb } = await steadyMemory(proc);

    for (const { iteration, change } of opts.changes) {
      const port = change.after ?? change.before!;
      const synced = proc.syncCount;
      const t0 = nowNs();
      if (change.after) await replaceFile(source, ownFileName(port), manifestText([change.after]));
      else await unlink(join(source, ownFileName(port)));
      await proc.syncAfter(synced, opts.deadlineMs);
      for (let tries = 1; ; tries++) {
        const start = nowNs();
        const state = await h.readBack(change);
        const readbackMs = round3(msSince(start));
        if (h.shows(state, change)) {
          const ms = round3(msSince(t0));
          record({ kind: change.kind, iteration, ms, tries, readbackMs, rssKb: (await proc.memory()).rssKb });
          break;
        }
        if (msSince(t0) > opts.deadlineMs) throw new Error(`end-to-end clock: ${change.kind} of ${change.key} did not reach the kernel within ${opts.deadlineMs} ms`);
      }
    }
    const { hwmKb } = await proc.memory();
    return { entry: droverEntry(), firstSyncMs, rssKb, peakRssKb: hwmKb };
  } finally {
    await proc?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
