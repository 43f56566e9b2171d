/**
 * The bench process's side of a measuring worker (worker.ts): starts it
 * inside the node namespace with `ip netns exec`, sends it the job, relays
 * its progress, and collects its samples and the size's run facts.
 *
 * The protocol is one JSON object per line on the worker's stdout:
 * `{"t":"progress","phase","step","note"?}`, `{"t":"sample",...Sample}`,
 * `{"t":"done","run":SizeRun}` or `{"t":"error","message"}`. The worker's
 * stderr is kept (its last 4,000 characters) for the error message.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { ProxyMode } from '../proxier/backend.ts';
import { benchScriptCommand } from './script-command.ts';
import type { MeasureOptions, StepReporter, TestbedView } from './measure.ts';
import type { Sample, SizeRun } from './types.ts';

/** What a worker measures: one mode and size on a testbed that already exists. Serialisable. */
export interface WorkerJob {
  readonly mode: ProxyMode;
  readonly view: TestbedView;
  /** Service ports. */
  readonly n: number;
  readonly measure: MeasureOptions;
  /** Full re-render samples (0: skipped at this size). */
  readonly wholeRepeats: number;
  readonly fullBaselineMax: number;
  /** iptables variant for the iptables rules IPVS mode also writes. */
  readonly iptablesVariant: string;
}

/** One line of the worker's output. */
export type WorkerMessage =
  | { readonly t: 'progress'; readonly phase: string; readonly step: boolean; readonly note?: string }
  | ({ readonly t: 'sample' } & Sample)
  | { readonly t: 'done'; readonly run: SizeRun }
  | { readonly t: 'error'; readonly message: string };

/** The command line that starts worker.ts (script-command.ts benchScriptCommand). */
export function workerCommand(moduleUrl: string = import.meta.url): string[] {
  return benchScriptCommand('worker', moduleUrl);
}

/**
 * Run `job` in a worker inside `job.view.node`, pushing its samples to
 * `samples` and its progress to `progress`.
 * A line that is not JSON (something else wrote to the worker's stdout) is
 * reported with the result, which is then not trusted.
 * @returns the size's run facts, as the worker measured them (peak RSS is the worker's).
 * @throws Error with the worker's message, its exit status and the end of its stderr when it fails or cannot start.
 */
export async function runSizeInWorker(job: WorkerJob, samples: Sample[], progress: StepReporter): Promise<SizeRun> {
  const child = spawn('ip', ['netns', 'exec', job.view.node, ...workerCommand()], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4000)));
  let startError: Error | undefined;
  const exited = new Promise<string>((resolve) => {
    child.once('error', (err) => {
      startError = err;
      resolve(`could not start: ${err.message}`);
    });
    child.once('close', (code, signal) => resolve(signal ? `signal ${signal}` : `exit code ${code}`));
  });
  // A worker that dies before reading its job closes the pipe: that shows as its exit status below.
  child.stdin.on('error', () => undefined);
  child.stdin.end(JSON.stringify(job));
  let run: SizeRun | undefined;
  let failure: string | undefined;
  if (!startError) {
    for await (const line of createInterface({ input: child.stdout })) {
      if (line.trim() === '') continue;
      let msg: WorkerMessage;
      try {
        msg = JSON.parse(line) as WorkerMessage;
      } catch {
        failure ??= `it printed a line that is not JSON: ${line.slice(0, 200)}`;
        continue;
      }
      if (msg.t === 'progress') progress(msg.phase, msg.step, msg.note);
      else if (msg.t === 'sample') {
        const { t: _t, ...sample } = msg;
        samples.push(sample);
      } else if (msg.t === 'done') run = msg.run;
      else failure = msg.message;
    }
  }
  const status = await exited;
  if (failure || !run) {
    const tail = stderr.trim() ? `; stderr: ${stderr.trim().split('\n').slice(-5).join(' | ')}` : '';
    throw new Error(`bench worker for ${job.mode} ${job.n} services (${status}): ${failure ?? 'ended without a result'}${tail}`);
  }
  return run;
}
