/**
 * One drover per network namespace (src/util/instance-lock.ts), with real
 * TCP traffic through a ClusterIP from the client namespace: while
 * `drover run` serves two Services, a second `drover run` with another
 * `--source`, started inside the namespace where the first has `--netns`,
 * refuses in one line naming the first one's PID, and writes nothing; no
 * connection fails. `cleanup` refuses beside the run, and with `--force`
 * removes the rules, which the run then puts back. A run that is gone
 * leaves its lock to the next drover: stopped, it removes it; SIGKILLed,
 * the next one takes the stale lock over. Every test builds its own
 * network namespaces and removes them, also on failure.
 */
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { LOCK_DIR } from '../../src/util/instance-lock.ts';
import { CLUSTER_IP, DROVER, drover, finish, manifestWorld, type ManifestWorld, reached, runFlags, startDrover, synced, traffic } from '../support/faults.ts';
import { until } from '../support/wait.ts';

const unavailable = await testbedUnavailableReason();

/** A Service `name` on `ip`:80 with endpoints `ips`:8080, and its EndpointSlice. */
const service = (name: string, ip: string, ips: readonly string[]) =>
  `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: nsd}\nspec: {clusterIP: ${ip}, ports: [{name: http, port: 80, protocol: TCP}]}\n---\n` +
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ${name}-1, namespace: nsd, labels: {kubernetes.io/service-name: ${name}}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n${ips.map((i) => `  - {addresses: [${i}], conditions: {ready: true}}\n`).join('')}`;

/** The first run's Services: web (the traffic's) and api. */
const SERVED = `${service('web', CLUSTER_IP, ['10.180.0.1', '10.180.0.2'])}---\n${service('api', '172.30.0.51', ['10.180.0.3'])}`;
/** The second run's source: one other Service. */
const OTHER = service('other', '172.30.0.60', ['10.180.0.3']);

const common = ['--iptables-backend', 'nft', '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16'];

/** `iptables-nft-save -t nat` in the node namespace. */
const natSave = async (w: ManifestWorld) => (await run('iptables-nft-save', ['-t', 'nat'], { netns: w.topo.node })).stdout;

/** The lock file of the node namespace. */
async function lockFile(w: ManifestWorld): Promise<string> {
  const st = await stat(`/run/netns/${w.topo.node}`);
  return join(LOCK_DIR, `netns-${st.dev}-${st.ino}.lock`);
}

/** The lines of `stderr` that are not JSON log lines: what drover says to the user. */
const said = (stderr: string) => stderr.split('\n').filter((l) => l !== '' && !l.startsWith('{'));

/** `drover run ARGS` inside `netns` (no --netns), to its end or until the test ends; its exit code and stderr. */
function runInside(t: ExecutionContext, netns: string, args: readonly string[]) {
  const child = spawn('ip', ['netns', 'exec', netns, process.execPath, DROVER, 'run', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  let code: number | null | undefined;
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', (c) => ((code = c), resolve())));
  t.teardown(async () => {
    if (code === undefined) child.kill('SIGKILL');
    await exited;
  });
  return { stderr: () => stderr, code: () => code, exited };
}

if (unavailable) {
  test.skip(`lock tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('a second drover run in the namespace refuses, naming the first one\'s PID; cleanup refuses beside it unless --force; the lock goes with the run', async (t) => {
    const w = await manifestWorld(t, SERVED);
    const flags = ['--source', w.source, '--state-dir', join(w.scratch, 'state'), ...common, '--sync-period', '2s'];
    const first = startDrover([...flags, '--netns', w.topo.node, ...runFlags(w)]);
    t.teardown(() => first.kill());
    await synced(first, 1);
    // The status file is written after the sync's log line, on its own queue: wait for it.
    const statusFile = join(w.scratch, 'status.json');
    await until('the first run\'s status file', async () => existsSync(statusFile), 30_000);
    const pid = (JSON.parse(await readFile(statusFile, 'utf8')) as { pid: number }).pid;
    t.like(JSON.parse(await readFile(await lockFile(w), 'utf8')), { pid, command: 'run', mode: 'iptables', netns: w.topo.node });
    t.is(await reached(w), 'b1,b2');
    const load = await traffic(t, w);

    // The second run, inside the namespace, with another source (and its own state, status file and a quick sync period).
    const other = join(w.scratch, 'other');
    await mkdir(other);
    await writeFile(join(other, 'other.yaml'), OTHER);
    const second = runInside(t, w.topo.node, [
      '--source', other, '--state-dir', join(w.scratch, 'state-2'), ...common, '--sync-period', '2s', '--min-sync-period', '200ms',
      '--status-file', join(w.scratch, 'status-2.json'), '--metrics-bind-address', '', '--healthz-bind-address', '',
    ]);
    // Refused at once, once it has started (a Node.js start: seconds on a loaded machine); a second run that is not
    // refused fights the first over the rules meanwhile (many sync periods).
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([second.exited, new Promise((r) => (bound = setTimeout(r, 60_000)))]);
    clearTimeout(bound);
    // cleanup beside the run, and traffic for a few seconds after it (a cleanup that is not refused breaks new connections).
    const refused = await drover(['cleanup', '--netns', w.topo.node, '--iptables-backend', 'nft']);
    await new Promise((r) => setTimeout(r, 3000));
    const s = await finish(t, 'a second drover run and a cleanup beside a run', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));

    const refusal = new RegExp(
      `^drover: drover run \\(PID ${pid}, --mode iptables\\) holds this network namespace since \\S+ \\(lock /run/drover/netns-\\d+-\\d+\\.lock\\): ` +
        'two drovers would program the same rules against each other; stop it first$',
    );
    t.is(second.code(), 1, second.stderr());
    t.is(said(second.stderr()).length, 1, second.stderr());
    t.regex(said(second.stderr())[0] ?? '', refusal);
    t.false(existsSync(join(w.scratch, 'state-2', 'allocations.json')), 'the refused run wrote no state');
    t.is(refused.code, 1, refused.stderr);
    t.deepEqual(said(refused.stderr).map((l) => l.replace(/since \S+ \(lock \S+\)/, 'since T (lock L)')), [
      `drover: drover run (PID ${pid}, --mode iptables) holds network namespace ${w.topo.node} since T (lock L): it would put back what cleanup removes; stop it first, or give --force`,
    ]);
    const nat = await natSave(w);
    t.true(nat.includes('nsd/web:http cluster IP') && nat.includes('nsd/api:http cluster IP'), nat);
    t.false(nat.includes('nsd/other'), 'neither wrote nor removed anything');

    // cleanup --force removes the rules all the same; the run, which sees its canaries gone, puts them back.
    const forced = await drover(['cleanup', '--force', '--netns', w.topo.node, '--iptables-backend', 'nft']);
    t.is(forced.code, 0, forced.stderr);
    t.regex(forced.stdout, /^removed [1-9]\d* chains and [1-9]\d* hook rules\n$/);
    t.regex(forced.stderr, /"msg":"drover run \(PID \d+, --mode iptables\) holds network namespace \S+ since \S+ \(lock \S+\); going on anyway \(--force\)"/);
    const removed = Date.now();
    await until('the run to put its rules back', async () => (await reached(w)) === 'b1,b2', 30_000);
    t.log(`the run put its rules back ${Date.now() - removed} ms after cleanup --force`);

    // Stopped, the run gives the lock up: cleanup needs no --force any more.
    await first.stop();
    t.false(existsSync(await lockFile(w)), 'the lock file is removed');
    const after = await drover(['cleanup', '--netns', w.topo.node, '--iptables-backend', 'nft']);
    t.is(after.code, 0, after.stderr);
    t.false((await natSave(w)).includes('KUBE-'));
  });

  test.serial('a SIGKILLed run leaves a stale lock, which the next drover takes over', async (t) => {
    const w = await manifestWorld(t, SERVED);
    const flags = ['--source', w.source, '--state-dir', join(w.scratch, 'state'), ...common, '--netns', w.topo.node, ...runFlags(w)];
    const first = startDrover(flags);
    t.teardown(() => first.kill());
    await synced(first, 1);
    const lock = await lockFile(w);
    const held = await readFile(lock, 'utf8');
    await first.kill();
    t.is(await readFile(lock, 'utf8'), held, 'SIGKILL leaves the lock file');

    const next = startDrover(flags);
    t.teardown(() => next.stop());
    await synced(next, 1);
    t.deepEqual(next.lines(/^took over the lock of a drover that is gone$/).map((l) => (l.was as { pid: number }).pid), [(JSON.parse(held) as { pid: number }).pid]);
    t.is(await reached(w), 'b1,b2');
  });
}
