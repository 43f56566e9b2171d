/**
 * drover never deletes on an incomplete view of desired state: a manifest
 * file gains a broken document, and `sync --once` and a restarted `run`
 * keep every Service serving real connections, with the kernel's rules
 * unchanged; once the file is whole again, deletions resume. In fresh
 * network namespaces, with the nf_tables iptables.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { until } from '../support/wait.ts';
import { DROVER } from '../support/drover-bin.ts';

const unavailable = await testbedUnavailableReason();

const service = (name: string, ip: string) =>
  `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: nsd}\nspec: {clusterIP: ${ip}, ports: [{name: http, port: 80, protocol: TCP}]}\n`;
const slice = (name: string, ip: string) =>
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ${name}-1, namespace: nsd, labels: {kubernetes.io/service-name: ${name}}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints: [{addresses: [${ip}], conditions: {ready: true}}]\n`;
const GOOD = [service('good', '172.30.0.50'), slice('good', '10.180.0.1')];
const OTHER = [service('other', '172.30.0.51'), slice('other', '10.180.0.2')];
/** `other`'s Service with a syntax error (an unclosed flow map), as in a bad edit. */
const OTHER_BROKEN = [service('other', '172.30.0.51').replace('namespace: nsd}', 'namespace: nsd'), slice('other', '10.180.0.2')];
const docs = (...d: string[]) => d.join('---\n');

if (unavailable) {
  test.skip(`incomplete-source kernel tests skipped: ${unavailable}`, () => {});
} else {
  let topo: Topology;
  let dir: string;
  test.before(async () => {
    topo = await createTopology({
      backends: [
        { name: 'good', ip: '10.180.0.1', ports: [8080] },
        { name: 'other', ip: '10.180.0.2', ports: [8080] },
      ],
      serviceCidr: '172.30.0.0/16',
    });
    dir = await mkdtemp(join(tmpdir(), 'drover-incomplete-'));
  });
  test.after.always(async () => {
    await topo?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
    if (dir) await rm(`${dir}.state`, { recursive: true, force: true });
  });

  const flags = () => ['--source', dir, '--state-dir', `${dir}.state`, '--netns', topo.node, '--iptables-backend', 'nft', '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16'];
  /** nat and filter as iptables-save prints them, without comments and counters. */
  const save = async () => {
    const out = await Promise.all(['nat', 'filter'].map(async (t) => (await run('iptables-nft-save', ['-t', t], { netns: topo.node })).stdout));
    return out.join('').split('\n').filter((l) => !l.startsWith('#')).map((l) => l.replace(/\[\d+:\d+\]/, '')).join('\n');
  };
  /** Connections to each Service's ClusterIP, by the backend that answered. */
  const reach = async () => {
    const good = await probe(topo, { host: '172.30.0.50', port: 80, count: 3, timeoutMs: 1000 });
    const other = await probe(topo, { host: '172.30.0.51', port: 80, count: 3, timeoutMs: 1000 });
    return { good: good.counts, other: other.counts };
  };
  const SERVING = { good: { good: 3 }, other: { other: 3 } };

  test.serial('a broken document: sync --once and a restarted run delete nothing and keep every Service serving; a whole file deletes again', async (t) => {
    const file = join(dir, 'f.yaml');
    await writeFile(file, docs(...GOOD, ...OTHER));
    const first = await run(process.execPath, [DROVER, 'sync', '--once', ...flags()], { allowFail: true, timeoutMs: 60_000 });
    t.is(first.code, 0, first.stderr);
    const programmed = await save();
    t.true(programmed.includes('nsd/other:http cluster IP'));
    t.deepEqual(await reach(), SERVING);

    // The file gains a broken document: exit 3, the document named, nothing deleted.
    await writeFile(file, docs(...GOOD, ...OTHER_BROKEN));
    const once = await run(process.execPath, [DROVER, 'sync', '--once', ...flags()], { allowFail: true, timeoutMs: 60_000 });
    t.is(once.code, 3, once.stderr);
    t.regex(once.stderr, /f\.yaml:\d+:\d+: document #3 \(from line \d+\): syntax error: .*; document skipped/);
    t.regex(once.stderr, /source is incomplete \(1 part could not be read\): no service port is deleted until it is whole again/);
    t.is(await save(), programmed, 'the rules are unchanged');
    t.deepEqual(await reach(), SERVING);
    // diff shows what the next full sync would write: nothing; 3 says the source is incomplete.
    const diff = await run(process.execPath, [DROVER, 'diff', ...flags()], { allowFail: true, timeoutMs: 60_000 });
    t.deepEqual([diff.code, diff.stdout], [3, 'no differences\n'], diff.stderr);

    // A restarted run on the broken file: the same.
    const status = join(dir, '..', `${dir.split('/').pop()}.status.json`);
    // With --netns the servers would listen on the host (the health server on every address): off.
    const child = spawn(process.execPath, [DROVER, 'run', ...flags(), '--min-sync-period', '200ms', '--status-file', status, '--metrics-bind-address', '', '--healthz-bind-address', ''], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let logs = '';
    child.stderr.on('data', (b: Buffer) => (logs += b.toString()));
    try {
      await until('the first sync', async () => logs.includes('full sync done; deletions held: the source is incomplete'), 30_000);
      t.is(await save(), programmed, 'the rules are unchanged after a restart');
      t.deepEqual(await reach(), SERVING);
      // The status file is written after the sync's log line, on its own queue: wait for it.
      await until('the status file', async () => existsSync(status), 30_000);
      const shown = await run(process.execPath, [DROVER, 'status', '--status-file', status, '--netns', topo.node, '--iptables-backend', 'nft'], { allowFail: true, timeoutMs: 60_000 });
      t.regex(shown.stdout, /^source read: incomplete: 1 part could not be read; no service port is deleted until it is whole$/m);
      t.regex(shown.stdout, /^ {2}missing: {3}.*f\.yaml:\d+:\d+: document #3 .*document skipped$/m);

      // `other` is removed and the file is whole again: its rules go, good keeps serving.
      await writeFile(file, docs(...GOOD));
      await until('the deletion', async () => !(await save()).includes('nsd/other'), 15_000);
      t.deepEqual((await reach()).good, { good: 3 });
      t.false((await save()).includes('10.180.0.2'), 'no rule of other is left');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      await rm(status, { force: true });
    }
  });
}
