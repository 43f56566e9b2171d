/**
 * What the fault tests (test/kernel/faults*.test.ts) share: `drover` run as
 * a child process with its logs kept, faults injected into iptables-restore
 * through wrappers on PATH, and the one log line per case.
 */
import type { ExecutionContext } from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { probe, startTraffic, type Traffic, type TrafficOptions, type TrafficSummary } from '../../src/testbed/probe.ts';
import { createTopology, type Topology } from '../../src/testbed/topology.ts';
import { until } from './wait.ts';
import { DROVER } from './drover-bin.ts';

/** The drover command of this checkout (drover-bin.ts). */
export { DROVER };

/** A finished command: exit code and output. */
export interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run `drover ARGS` to the end with `env` added to the environment (e.g.
 * XTABLES_LOCKFILE); `netns` runs the whole process inside that namespace.
 */
export function drover(args: readonly string[], opts: { env?: NodeJS.ProcessEnv; netns?: string } = {}): Promise<Finished> {
  const child = spawnDrover(args, opts);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

function spawnDrover(args: readonly string[], opts: { env?: NodeJS.ProcessEnv; netns?: string; detached?: boolean }): ChildProcess {
  const argv = [process.execPath, DROVER, ...args];
  const [file, ...rest] = opts.netns ? ['ip', 'netns', 'exec', opts.netns, ...argv] : argv;
  return spawn(file!, rest, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env }, detached: opts.detached === true });
}

/** A `drover run` child; its JSON log lines are kept. */
export interface RunningDrover {
  /** Everything logged so far (stderr). */
  logs(): string;
  /** The parsed log lines whose `msg` matches `msg`. */
  lines(msg: RegExp): Array<Record<string, unknown>>;
  /** Whether the process is still running. */
  readonly alive: boolean;
  /** drover's process id (bin/drover.js runs the CLI in its own process), for /proc/PID/status. */
  readonly pid: number;
  /** SIGTERM and wait for the exit (drover leaves the rules in place). */
  stop(): Promise<void>;
  /** SIGKILL the process and every process it started (its process group), and wait for its exit. */
  kill(): Promise<void>;
}

/** Start `drover run ARGS` in its own process group (see {@link drover} for `opts`). */
export function startDrover(args: readonly string[], opts: { env?: NodeJS.ProcessEnv; netns?: string } = {}): RunningDrover {
  const child = spawnDrover(['run', ...args], { ...opts, detached: true });
  let logs = '';
  let alive = true;
  child.stdout!.resume();
  child.stderr!.on('data', (b: Buffer) => (logs += b.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => (alive = false));
  const signal = async (sig: NodeJS.Signals, group: boolean) => {
    if (!alive) return;
    try {
      process.kill(group ? -child.pid! : child.pid!, sig);
    } catch {
      // already gone
    }
    await exited;
  };
  return {
    logs: () => logs,
    lines: (msg) =>
      logs
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => typeof l.msg === 'string' && msg.test(l.msg)),
    get alive() {
      return alive;
    },
    pid: child.pid!,
    stop: () => signal('SIGTERM', false),
    kill: () => signal('SIGKILL', true),
  };
}

/** One invocation of a wrapped iptables-restore: when it started (ms since the epoch) and what the wrapper did. */
export interface RestoreCall {
  readonly at: number;
  readonly action: 'pass' | 'fail' | 'stall';
}

/** Faults injected into `iptables-{nft,legacy}-restore`; see {@link restoreFaults}. */
export interface RestoreFaults {
  /** Put this first on drover's PATH. */
  readonly bin: string;
  /** The environment that makes drover run the wrappers. */
  readonly env: NodeJS.ProcessEnv;
  /**
   * Make the next `n` restores fail mid-run: each feeds the first half of
   * its payload to the real iptables-restore (which applies what it can of
   * it), then exits 1.
   */
  failNext(n: number): Promise<void>;
  /** Make the next restore stop before it runs (it sleeps 120 s), until the process is killed. */
  stallNext(): Promise<void>;
  /** Back to passing every restore through. */
  clear(): Promise<void>;
  /** Every restore so far, in order. */
  calls(): Promise<RestoreCall[]>;
  /** Remove the wrappers. */
  remove(): Promise<void>;
}

const WRAPPER = (real: string, dir: string) => `#!/bin/sh
# drover test fault wrapper around ${real}
ctl=${dir}
now=$(date +%s%3N)
if [ -s "$ctl/fail" ]; then
  n=$(cat "$ctl/fail")
  if [ "$n" -gt 0 ]; then
    echo $((n - 1)) > "$ctl/fail"
    echo "$now fail" >> "$ctl/calls"
    payload=$(mktemp)
    cat > "$payload"
    size=$(wc -c < "$payload")
    head -c $((size / 2)) "$payload" | ${real} "$@" >/dev/null 2>&1
    rm -f "$payload"
    echo "injected fault: iptables-restore stopped mid-run" >&2
    exit 1
  fi
fi
if [ -e "$ctl/stall" ]; then
  rm -f "$ctl/stall"
  echo "$now stall" >> "$ctl/calls"
  touch "$ctl/stalled"
  exec sleep 120
fi
echo "$now pass" >> "$ctl/calls"
exec ${real} "$@"
`;

/**
 * Wrappers named `iptables-nft-restore` and `iptables-legacy-restore` in
 * `dir`/bin that run the real ones from /usr/sbin, or inject a fault when
 * told; controlled through files in `dir`.
 */
export async function restoreFaults(dir: string): Promise<RestoreFaults> {
  const bin = join(dir, 'bin');
  await mkdir(bin, { recursive: true });
  for (const variant of ['nft', 'legacy']) {
    const file = join(bin, `iptables-${variant}-restore`);
    await writeFile(file, WRAPPER(`/usr/sbin/iptables-${variant}-restore`, dir));
    await chmod(file, 0o755);
  }
  await writeFile(join(dir, 'calls'), '');
  return {
    bin,
    env: { PATH: `${bin}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}` },
    failNext: (n) => writeFile(join(dir, 'fail'), `${n}\n`),
    stallNext: () => writeFile(join(dir, 'stall'), ''),
    clear: async () => {
      await rm(join(dir, 'fail'), { force: true });
      await rm(join(dir, 'stall'), { force: true });
    },
    calls: async () =>
      (await readFile(join(dir, 'calls'), 'utf8'))
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => {
          const [at, action] = l.split(' ');
          return { at: Number(at), action: action as RestoreCall['action'] };
        }),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/** The line each fault test logs, collected into the fault table: `fault CASE: attempted N, failed N, lost N`. */
export function faultLine(name: string, s: TrafficSummary): string {
  return `fault ${name}: attempted ${s.attempted}, failed ${s.failed}, lost ${s.lost}`;
}

/** The ClusterIP of the Service every fault test serves (port 80, endpoints on 8080). */
export const CLUSTER_IP = '172.30.0.50';

/** One case's namespaces (backends b1, b2, b3 at 10.180.0.1-3:8080) and a scratch folder. */
export interface FaultWorld {
  readonly topo: Topology;
  /** Scratch space: status file, state, fault control files, the source. */
  readonly scratch: string;
}

/** A world its maker removes: {@link openFaultWorld}, {@link openManifestWorld}. */
export interface OwnedWorld {
  /** Remove the namespaces and the scratch folder. */
  destroy(): Promise<void>;
}

/**
 * Build a world that the caller removes with `destroy()` (for one world
 * shared by the tests of a file: destroy it in `test.after.always`).
 * `readyTimeoutMs`: how long the backends' servers may take to start (the
 * topology's default when absent; the emulated test guest needs more).
 */
export async function openFaultWorld(opts: { readyTimeoutMs?: number } = {}): Promise<FaultWorld & OwnedWorld> {
  const topo = await createTopology({
    ...opts,
    backends: [
      { name: 'b1', ip: '10.180.0.1', ports: [8080], udpPorts: [8080] },
      { name: 'b2', ip: '10.180.0.2', ports: [8080], udpPorts: [8080] },
      { name: 'b3', ip: '10.180.0.3', ports: [8080], udpPorts: [8080] },
    ],
    serviceCidr: '172.30.0.0/16',
  });
  let scratch: string;
  try {
    scratch = await mkdtemp(join(tmpdir(), 'drover-faults-'));
  } catch (err) {
    await topo.destroy();
    throw err;
  }
  const destroy = async () => {
    await topo.destroy();
    await rm(scratch, { recursive: true, force: true });
  };
  return { topo, scratch, destroy };
}

/**
 * Build a world; it is removed when the test ends, also on failure.
 * `readyTimeoutMs`: see {@link openFaultWorld}.
 */
export async function faultWorld(t: ExecutionContext, opts: { readyTimeoutMs?: number } = {}): Promise<FaultWorld> {
  const { destroy, ...w } = await openFaultWorld(opts);
  t.teardown(destroy);
  return w;
}

/**
 * The flags of every `drover run` of a case: quick syncs, the status file in
 * `w.scratch`, and no metrics or health servers (their ports would clash
 * with another drover on the machine).
 */
export const runFlags = (w: FaultWorld) => ['--min-sync-period', '200ms', '--status-file', join(w.scratch, 'status.json'), '--metrics-bind-address', '', '--healthz-bind-address', ''];

/** Until `d` has logged `n` successful syncs. */
export const synced = (d: RunningDrover, n: number, timeoutMs = 30_000) => until(`${n} syncs`, async () => d.lines(/sync done/).length >= n, timeoutMs);

/**
 * The backends that answered 30 new connections to the ClusterIP, sorted
 * and joined by commas. Connections spread at random over the endpoints:
 * 30 miss one of two with a chance of about 2 in 10^9.
 */
export async function reached(w: FaultWorld): Promise<string> {
  const r = await probe(w.topo, { host: CLUSTER_IP, port: 80, count: 30, timeoutMs: 1000 });
  return Object.keys(r.counts).sort().join(',');
}

/**
 * Traffic through the ClusterIP from the client, stopped when the test ends
 * (also on failure): 4 long-lived connections, a new one every round of
 * 100 ms. The deadlines leave room for a loaded machine: 3 s for a new
 * connection, 5 s for a reply on a long-lived one. `opts` overrides these.
 */
export async function traffic(t: ExecutionContext, w: FaultWorld, opts: Pick<TrafficOptions, 'held' | 'timeoutMs' | 'heldTimeoutMs'> = {}): Promise<Traffic> {
  const load = await startTraffic(w.topo, { host: CLUSTER_IP, port: 80, held: 4, intervalMs: 100, timeoutMs: 3000, heldTimeoutMs: 5000, ...opts });
  t.teardown(() => load.stop().then(() => {}, () => {}));
  return load;
}

/**
 * {@link startTraffic} to each of `loads` at once from `topo`, each stopped
 * when the test ends (also on failure, and also when another of them could
 * not be started), in the order given.
 */
export async function startLoads(t: ExecutionContext, topo: Topology, loads: readonly TrafficOptions[]): Promise<Traffic[]> {
  return Promise.all(
    loads.map(async (opts) => {
      const load = await startTraffic(topo, opts);
      t.teardown(() => load.stop().then(() => {}, () => {}));
      return load;
    }),
  );
}

/** Stop the traffic, log its {@link faultLine}, and check that it ran and that no long-lived connection broke. */
export async function finish(t: ExecutionContext, name: string, load: Traffic): Promise<TrafficSummary> {
  const s = await load.stop();
  t.log(faultLine(name, s));
  t.is(s.lost, 0, `long-lived connections lost: ${JSON.stringify(s.lostErrors)}`);
  t.true(s.attempted > 0 && s.heldRequests > 0, 'traffic ran');
  return s;
}

/**
 * The kernel holds what a fresh full sync would write: `drover ARGS` (a
 * `diff` with the case's flags) exits 0 and prints "no differences".
 */
export async function assertConverged(t: ExecutionContext, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<void> {
  const diff = await drover(args, { env });
  t.deepEqual([diff.code, diff.stdout], [0, 'no differences\n'], diff.stderr);
}

/** The fault world plus a manifest folder (the source) holding one file, web.yaml. */
export interface ManifestWorld extends FaultWorld {
  readonly source: string;
  readonly file: string;
}

/** `w` with `manifest` written to `<scratch>/manifests/web.yaml`. */
async function withManifest<W extends FaultWorld>(w: W, manifest: string): Promise<W & Pick<ManifestWorld, 'source' | 'file'>> {
  const source = join(w.scratch, 'manifests');
  await mkdir(source);
  const file = join(source, 'web.yaml');
  await writeFile(file, manifest);
  return { ...w, source, file };
}

/** {@link faultWorld} with `manifest` written to `<scratch>/manifests/web.yaml`. */
export async function manifestWorld(t: ExecutionContext, manifest: string): Promise<ManifestWorld> {
  return withManifest(await faultWorld(t), manifest);
}

/** {@link openFaultWorld} with `manifest` written to `<scratch>/manifests/web.yaml`; the caller destroys it, also on failure. */
export async function openManifestWorld(manifest: string): Promise<ManifestWorld & OwnedWorld> {
  const w = await openFaultWorld();
  try {
    return await withManifest(w, manifest);
  } catch (err) {
    await w.destroy();
    throw err;
  }
}
