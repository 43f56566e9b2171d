/**
 * Progress of a benchmark run on stderr: a progress bar (cli-progress) when
 * stderr is a terminal; otherwise one line per finished phase and one at
 * every tenth of the steps, so that a log file stays readable. cli-progress
 * is an optional package (optional.ts): without it, a terminal gets the
 * lines too.
 */
import { loadOptional } from './optional.ts';
import type { ProgressEvent } from './run.ts';

/** Where the run's progress goes. */
export interface ProgressSink {
  update(event: ProgressEvent): void;
  /** Finish the bar (idempotent). */
  stop(): void;
}

/** Phase lines on `stream`: every note, and one line at every tenth of the steps. */
export function lineSink(stream: { write(s: string): unknown }): ProgressSink {
  let tenth = 0;
  return {
    update: (e) => {
      if (e.note) stream.write(`${e.note}\n`);
      const now = e.total > 0 ? Math.floor((e.done * 10) / e.total) : 0;
      if (now > tenth && now < 10) stream.write(`${now * 10}% of the steps done (${e.phase})\n`);
      tenth = Math.max(tenth, now);
    },
    stop: () => undefined,
  };
}

/** A sink for `stream`: a bar on a TTY when cli-progress is installed, phase lines otherwise ({@link lineSink}). */
export async function progressSink(stream: NodeJS.WriteStream = process.stderr): Promise<ProgressSink> {
  if (!stream.isTTY) return lineSink(stream);
  const loaded = await loadOptional(['cli-progress'], 'no progress bar', () => import('cli-progress'), stream);
  if (!loaded) return lineSink(stream);
  const cliProgress = loaded.default;
  const multi = new cliProgress.MultiBar(
    {
      stream,
      format: '{bar} {percentage}% | {value}/{total} steps | {duration_formatted} | ETA {eta_formatted} | {phase}',
      hideCursor: false,
      clearOnComplete: false,
      etaBuffer: 40,
      fps: 5,
    },
    cliProgress.Presets.shades_classic,
  );
  let bar: InstanceType<typeof cliProgress.SingleBar> | undefined;
  let stopped = false;
  return {
    update(e) {
      if (stopped) return;
      bar ??= multi.create(e.total, 0, { phase: e.phase });
      if (e.note) multi.log(`${e.note}\n`);
      bar.setTotal(e.total);
      bar.update(e.done, { phase: e.phase });
    },
    stop() {
      if (stopped) return;
      stopped = true;
      multi.stop();
    },
  };
}
