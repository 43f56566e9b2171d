/**
 * A measuring worker of `drover bench`, started by worker-client.ts inside
 * the node namespace (`ip netns exec NODE node worker.ts`), for the modes
 * whose sockets act on the namespace of their process (IPVS and rtnetlink;
 * the mode's driver says so with `bench.placement`). It reads one
 * WorkerJob (JSON) from stdin, measures that mode and size with the real
 * kernel (measure.ts), and prints WorkerMessage lines on stdout. Exit code
 * 0 after `done`, 1 after `error`.
 */
import { modeBench } from './modes/registry.ts';
import type { ModeHarness } from './harness.ts';
import { Prober } from './datapath.ts';
import { measureSize } from './measure.ts';
import type { Sample } from './types.ts';
import type { WorkerJob, WorkerMessage } from './worker-client.ts';

const say = (msg: WorkerMessage): void => {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
};

async function readJob(): Promise<WorkerJob> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return JSON.parse(text) as WorkerJob;
}

async function main(): Promise<void> {
  const job = await readJob();
  const bench = modeBench(job.mode);
  if (bench.placement !== 'namespace') throw new Error(`the bench worker measures the modes that run inside the node namespace, not ${job.mode}`);
  let h: ModeHarness | undefined;
  let prober: Prober | undefined;
  try {
    h = await bench.createHarness({ iptablesVariant: job.iptablesVariant });
    prober = await Prober.start(job.view.client);
    const run = await measureSize(
      h,
      prober,
      job.view,
      job.n,
      job.measure,
      job.wholeRepeats,
      job.fullBaselineMax,
      (sample: Sample) => say({ t: 'sample', ...sample }),
      (phase, step, note) => say({ t: 'progress', phase, step, ...(note ? { note } : {}) }),
    );
    say({ t: 'done', run });
  } finally {
    h?.close();
    await prober?.close();
  }
}

// Exit explicitly: a socket or timer left open must not keep the worker (and the bench waiting for it) alive.
main().then(
  () => process.exit(0),
  (err: unknown) => {
    say({ t: 'error', message: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  },
);
