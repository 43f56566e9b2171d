/**
 * Surviving faults, in iptables mode: while `drover run` serves a Service
 * from a manifest folder, a fault is injected, and real TCP traffic runs
 * through the ClusterIP from a client namespace the whole time: long-lived
 * connections exchanging requests and new connections, counted as
 * attempted, failed (no backend answered) and lost (a long-lived connection
 * broke). Each case must recover by itself: after it, the kernel holds what
 * a fresh sync would write (`drover diff` exits 0) and new connections
 * reach the endpoints; no long-lived connection is lost. Every test builds
 * its own network namespaces and removes them, also on failure.
 */
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import type { Traffic } from '../../src/testbed/probe.ts';
import { assertConverged, CLUSTER_IP, finish, manifestWorld, type ManifestWorld, reached, restoreFaults, runFlags, startDrover, synced, traffic, type RestoreFaults, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';

const unavailable = await testbedUnavailableReason();

/** nft by its path: under npm, PATH starts with node_modules/.bin, which may hold an unrelated `nft`. */
const NFT = '/usr/sbin/nft';

const service = `apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: nsd}\nspec: {clusterIP: ${CLUSTER_IP}, ports: [{name: http, port: 80, protocol: TCP}]}\n`;
const slice = (ips: readonly string[]) =>
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: nsd, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n${ips.map((ip) => `  - {addresses: [${ip}], conditions: {ready: true}}\n`).join('')}`;
/** The manifest before the fault (b1, b2) and the change made during it (b3 added). */
const BEFORE = `${service}---\n${slice(['10.180.0.1', '10.180.0.2'])}`;
const AFTER = `${service}---\n${slice(['10.180.0.1', '10.180.0.2', '10.180.0.3'])}`;

/** The fault world plus the manifest folder (the source) holding BEFORE in web.yaml. */
type World = ManifestWorld;

function world(t: ExecutionContext): Promise<World> {
  return manifestWorld(t, BEFORE);
}

/** The source and kernel flags of every drover command of a case (`inside`: drover runs in the node namespace, without --netns). */
const kernelFlags = (w: World, variant: 'nft' | 'legacy', inside = false) => [
  '--source', w.source, '--state-dir', join(w.scratch, 'state'), ...(inside ? [] : ['--netns', w.topo.node]),
  '--iptables-backend', variant, '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16',
];

/** `iptables-VARIANT-save -t nat` in the node namespace, with `env` added (XTABLES_LOCKFILE). */
const natSave = async (w: World, variant: 'nft' | 'legacy' = 'nft', env: NodeJS.ProcessEnv = {}) => {
  const child = spawn('ip', ['netns', 'exec', w.topo.node, `iptables-${variant}-save`, '-t', 'nat'], { env: { ...process.env, ...env } });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  await new Promise((r) => child.once('close', r));
  return out;
};

/** What {@link serving} started. */
interface Serving {
  readonly w: World;
  readonly d: RunningDrover;
  readonly load: Traffic;
  /** The restore wrappers drover runs (see restoreFaults). */
  readonly faults: RestoreFaults;
}

/**
 * A world with `drover run` on it, synced once, and traffic flowing through
 * the ClusterIP. drover runs the restore wrappers, with `env` added;
 * `inside`: in the node namespace itself rather than with --netns.
 */
async function serving(t: ExecutionContext, opts: { variant?: 'nft' | 'legacy'; env?: NodeJS.ProcessEnv; inside?: boolean; extra?: string[] } = {}): Promise<Serving> {
  const w = await world(t);
  const faults = await restoreFaults(join(w.scratch, 'faults'));
  const flags = [...kernelFlags(w, opts.variant ?? 'nft', opts.inside), ...runFlags(w), ...(opts.extra ?? [])];
  const d = startDrover(flags, { env: { ...faults.env, ...opts.env }, ...(opts.inside ? { netns: w.topo.node } : {}) });
  t.teardown(() => d.stop());
  await synced(d, 1);
  return { w, d, faults, load: await traffic(t, w) };
}

if (unavailable) {
  test.skip(`fault tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('iptables-restore failing mid-run: the partial sync falls back to a full one, retried with backoff', async (t) => {
    const { w, d, faults, load } = await serving(t);
    await faults.failNext(3);
    const since = (await faults.calls()).length;
    await writeFile(w.file, AFTER);
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 30_000);
    // The kernel shows the change before drover logs the sync that wrote it.
    await until('the recovery logged', async () => d.lines(/^full sync done/).length >= 2, 30_000);
    const s = await finish(t, 'iptables-restore fails mid-run', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));

    const calls = (await faults.calls()).slice(since);
    t.deepEqual(calls.slice(0, 4).map((c) => c.action), ['fail', 'fail', 'fail', 'pass']);
    // Backoff: 1 s, 2 s, 4 s between the attempts.
    const gaps = calls.slice(1, 4).map((c, i) => c.at - calls[i]!.at);
    gaps.forEach((gap, i) => t.true(gap >= 1000 * 2 ** i - 50, `attempt ${i + 2} came ${gap} ms after the one before`));
    const failures = d.lines(/sync failed/);
    t.deepEqual(failures.map((l) => [l.full, l.retryInMs]), [[false, 1000], [true, 2000], [true, 4000]]);
    t.true(d.lines(/^full sync done/).length >= 2, 'the recovery was a full sync');
    await assertConverged(t, ['diff', ...kernelFlags(w, 'nft')]);
  });

  test.serial('the xtables lock held by another process for 5 s (iptables-legacy): the change waits, then lands', async (t) => {
    const lock = join(tmpdir(), `drover-faults-${process.pid}.lock`);
    await writeFile(lock, '');
    t.teardown(() => rm(lock, { force: true }));
    const env = { XTABLES_LOCKFILE: lock };
    const { w, d, load } = await serving(t, { variant: 'legacy', env });
    // The holder marks the time it holds the lock with a file, created after taking it and removed before letting go.
    const mark = `${lock}.held`;
    t.teardown(() => rm(mark, { force: true }));
    const holder = spawn('flock', [lock, 'sh', '-c', 'touch "$1"; sleep 5; rm -f "$1"', 'sh', mark], { stdio: 'ignore' });
    t.teardown(() => void holder.kill('SIGKILL'));
    await until('the lock taken', async () => existsSync(mark), 5000, 20);
    await writeFile(w.file, AFTER);
    // While the lock is held, nothing is written: a read-back showing b3 followed by the mark still there is a write under the holder's lock.
    let early = false;
    for (;;) {
      const text = await natSave(w, 'legacy', env);
      if (!existsSync(mark)) break;
      if (text.includes('10.180.0.3')) early = true;
      await new Promise((r) => setTimeout(r, 250));
    }
    const at = Date.now();
    t.false(early, 'a rule was written while the lock was held');
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 30_000);
    t.log(`the change landed ${Date.now() - at} ms after the lock was released; ${d.lines(/sync failed/).length} syncs failed meanwhile`);
    const s = await finish(t, 'xtables lock held 5 s', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    await assertConverged(t, ['diff', ...kernelFlags(w, 'legacy')], env);
  });

  test.serial('a drover chain flushed and another deleted by hand: the drift check repairs both', async (t) => {
    // drover in the node namespace itself, as on a node, so it reads the nf_tables generation.
    const { w, d, load } = await serving(t, { inside: true, extra: ['--sync-period', '1s'] });
    const nat = await natSave(w);
    const svc = /-A KUBE-SERVICES .*nsd\/web:http cluster IP.* -j (KUBE-SVC-\w+)/.exec(nat)?.[1];
    const sep = new RegExp(`-A ${svc} .* -j (KUBE-SEP-\\w+)`).exec(nat)?.[1];
    t.truthy(svc && sep, nat);
    const before = d.lines(/^full sync done/).length;
    // One transaction, so that no repair comes between the two.
    await run(NFT, ['-f', '-'], { netns: w.topo.node, input: `flush chain ip nat ${svc}\ndelete chain ip nat ${sep}\n` });
    const broken = Date.now();
    await until('the repair', async () => d.lines(/^full sync done/).length > before, 30_000);
    t.log(`repaired ${Date.now() - broken} ms after the chains were changed`);
    await until('b1 and b2 served', async () => (await reached(w)) === 'b1,b2', 30_000);
    await finish(t, 'chain flushed and chain deleted by hand', load);
    t.regex(JSON.stringify(d.lines(/full sync$/)), /nf_tables generation/);
    await assertConverged(t, ['diff', ...kernelFlags(w, 'nft')]);
  });

  test.serial('SIGKILL in the middle of a sync, then a restart: the rules stay and are adopted without a flush', async (t) => {
    const { w, d: first, faults, load } = await serving(t);
    t.teardown(() => first.kill());
    /** The rules drover keeps across the restart, with their nf_tables handles, counters left out. */
    const kept = async () => {
      const nat = await natSave(w);
      const seps = [...nat.matchAll(/-A (KUBE-SEP-\w+) .*DNAT --to-destination 10\.180\.0\.[12]:8080/g)].map((m) => m[1]!);
      const chains = await Promise.all(['KUBE-SERVICES', 'KUBE-POSTROUTING', ...seps].map(async (c) => (await run(NFT, ['-a', 'list', 'chain', 'ip', 'nat', c], { netns: w.topo.node })).stdout));
      return chains.join('').replace(/counter packets \d+ bytes \d+/g, 'counter');
    };
    const handles = await kept();
    t.is(handles.match(/^\s*chain /gm)?.length, 4, handles);
    t.regex(handles, /# handle \d+/);
    await faults.stallNext();
    await writeFile(w.file, AFTER);
    await until('the sync under way', async () => existsSync(join(w.scratch, 'faults', 'stalled')), 30_000);
    await first.kill();
    t.false(first.alive);
    await new Promise((r) => setTimeout(r, 1000));
    t.is(await reached(w), 'b1,b2', 'the rules outlive drover');

    const second = startDrover([...kernelFlags(w, 'nft'), ...runFlags(w)], { env: faults.env });
    t.teardown(() => second.stop());
    await synced(second, 1);
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 30_000);
    const s = await finish(t, 'SIGKILL mid-sync, restart', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    t.is(await kept(), handles, 'the unchanged rules were not rewritten');
    await assertConverged(t, ['diff', ...kernelFlags(w, 'nft')]);
  });

  test.serial('the source replaced by garbage, then fixed: nothing is deleted meanwhile', async (t) => {
    const { w, d, load } = await serving(t, { extra: ['--log-level', 'debug'] });
    const before = await natSave(w);
    const strip = (s: string) => s.split('\n').filter((l) => !l.startsWith('#')).map((l) => l.replace(/\[\d+:\d+\]/, '')).join('\n');
    await writeFile(w.file, Buffer.from([0x7b, 0x7b, 0x3a, 0x0a, 0xff, 0xfe, 0x00, 0x5d, 0x2d, 0x2d, 0x0a, 0x09, 0x3a, 0x3a, 0x7d]));
    // The sync on the incomplete source logs its end at debug level when it changes nothing.
    await until('the sync on the garbage', async () => d.lines(/sync done; deletions held: the source is incomplete$/).length > 0, 30_000);
    t.true(d.lines(/^source is incomplete/).length > 0, 'the incomplete source is logged');
    t.is(strip(await natSave(w)), strip(before), 'the rules are unchanged');
    t.is(await reached(w), 'b1,b2');
    await writeFile(w.file, AFTER);
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 30_000);
    const s = await finish(t, 'source replaced by garbage, then fixed', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    await assertConverged(t, ['diff', ...kernelFlags(w, 'nft')]);
  });
}
