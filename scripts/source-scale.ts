/**
 * The file source at scale: how fast and how small drover is on SERVICES
 * Services of ENDPOINTS endpoints each (root, for the `drover run` parts):
 *
 *   tsx scripts/source-scale.ts [SERVICES [ENDPOINTS [RELOADS]]]   # default 10000 10 100
 *
 * It writes the manifests twice into a temporary folder: one JSON List
 * (`kubectl get svc,endpointslices -A -o json` shape: a Service and one
 * EndpointSlice per Service) and one JSON file per object. Then it measures:
 *
 *   1. parse and normalise: one FileSource load of the List in this
 *      process, read, parse, validate and Snapshot build (median of 3, each
 *      on a fresh source);
 *   2. for each layout, a real `drover run --netns NS` (iptables-nft) in a
 *      network namespace of its own, created here and deleted at the end,
 *      also on failure: its RSS (VmRSS from /proc) 5 s after its first full
 *      sync (steady) and its VmHWM after the edits below (peak); then 3 times one
 *      endpoint edited in the file (written beside it and renamed over it),
 *      and the time from the rename to the `partial sync done` log line
 *      that names the edited service port (the log's own timestamp);
 *   3. with the List, after those edits, RELOADS more in a row in the same
 *      `drover run`, each waited for (its `partial sync done` line): that
 *      process's VmRSS after the 10th and the largest after that, and the
 *      largest of the first 10 against the largest after them (the RSS
 *      rises and falls with each collection, so that one sample after the
 *      10th can fall low or high in that cycle);
 *   4. the same objects served by the Kubernetes API server double of the
 *      tests (test/support/kube-api.ts, on 127.0.0.1) to a `drover run
 *      --source kubernetes`: its RSS, steady and peak, and 3 times one
 *      EndpointSlice changed on the server, timed from the change to the
 *      `partial sync done` log line.
 *
 * Each `drover run` runs the compiled build when there is one (`npm run
 * build`), as a node does, else the TypeScript sources through tsx (about
 * 90 MB more RSS); DROVER_ENTRY=src or DROVER_ENTRY=dist chooses. The
 * build it used is printed first.
 *
 * SOURCE_SCALE_PARTS=parse,list,objects,kubernetes (the default: all)
 * runs only the parts named; the rows of the others say "not run".
 *
 * Prints the table of the issue with the measured values.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { installedEntry, parseProcMemory } from '../src/bench/drover-process.ts';
import { FileSource } from '../src/sources/file.ts';
import { withNetns } from '../src/testbed/netns.ts';
import { silentLogger } from '../src/util/log.ts';
import { FakeKubeApi, type ApiObject } from '../test/support/kube-api.ts';
import { syntheticSlice } from './synthetic-slice.ts';

const [services = 10_000, endpoints = 10, reloads = 100] = process.argv.slice(2).map(Number);
const DROVER = fileURLToPath(new URL('../bin/drover.js', import.meta.url));
const SERVICE_CIDR = '10.96.0.0/12';
/** The build each `drover run` runs (DROVER_ENTRY=src or dist chooses). */
const ENTRY = installedEntry();
/** The parts to run (SOURCE_SCALE_PARTS, comma-separated; default all). */
const PARTS = new Set((process.env.SOURCE_SCALE_PARTS ?? 'parse,list,objects,kubernetes').split(',').map((p) => p.trim()));

/** The Service and EndpointSlice of service `i`; `edit` changes the address of its first endpoint. */
function objectsOf(i: number, edit = 0): [object, object] {
  const name = `svc-${i}`;
  const namespace = `ns-${i % 50}`;
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace },
    spec: { clusterIP: `10.96.${(i >> 8) & 255}.${i & 255}`, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
  };
  const slice = syntheticSlice(namespace, name, i, endpoints, edit);
  return [service, slice];
}

/** The List of every object, with service `edited` (if any) given edit number `edit`. */
function listText(edited = -1, edit = 0): string {
  const items = [];
  for (let i = 0; i < services; i++) items.push(...objectsOf(i, i === edited ? edit : 0));
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}

/** Write `text` to `file` by renaming a dotfile beside it over it (what an editor or `kubectl … > tmp && mv` does). */
async function replaceFile(dir: string, file: string, text: string): Promise<number> {
  const tmp = join(dir, `.edit-${randomBytes(3).toString('hex')}`);
  await writeFile(tmp, text);
  const at = Date.now();
  await rename(tmp, file);
  return at;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const MB = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MB`;
const secs = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`);

/** VmRSS and VmHWM of process `pid`, bytes. */
async function memoryOf(pid: number): Promise<{ rss: number; hwm: number }> {
  const { rssKb, hwmKb } = parseProcMemory(await readFile(`/proc/${pid}/status`, 'utf8'));
  return { rss: rssKb * 1024, hwm: hwmKb * 1024 };
}

/** One line of drover's JSON log. */
interface LogLine {
  readonly msg: string;
  readonly time: string;
  readonly changed?: string[];
  readonly durationMs?: number;
}

/** A `drover run` process and its log lines, each handed to the waiters. */
class Drover {
  readonly child: ChildProcess;
  private waiters: Array<(l: LogLine) => boolean> = [];
  private exited = false;

  /** `source`: the `--source` flag and its value, with any flag it needs (`--kubeconfig PATH`). */
  constructor(netns: string, source: readonly string[], work: string) {
    this.child = spawn(process.execPath, [DROVER, 'run', '--netns', netns, ...source, '--cluster-cidr', '10.244.0.0/16', '--service-cidr', SERVICE_CIDR,
      '--iptables-backend', 'nft', '--state-dir', join(work, 'state'), '--status-file', join(work, 'status.json'),
      '--metrics-bind-address', '', '--healthz-bind-address', ''], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, DROVER_ENTRY: ENTRY } });
    this.child.on('exit', () => (this.exited = true));
    createInterface({ input: this.child.stderr! }).on('line', (text) => {
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        process.stderr.write(`drover: ${text}\n`);
        return;
      }
      this.waiters = this.waiters.filter((w) => !w(line));
    });
  }

  /** The first log line (from now on) for which `match` holds; rejects after `timeoutMs` or when drover exits. */
  next(match: (l: LogLine) => boolean, timeoutMs: number): Promise<LogLine> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no such log line within ${timeoutMs / 1000} s`)), timeoutMs);
      const onExit = () => reject(new Error(`drover exited with ${this.child.exitCode ?? this.child.signalCode}`));
      this.child.once('exit', onExit);
      this.waiters.push((l) => {
        if (!match(l)) return false;
        clearTimeout(timer);
        this.child.off('exit', onExit);
        resolve(l);
        return true;
      });
    });
  }

  /** SIGTERM, and wait for the exit. */
  async stop(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    await gone;
  }
}

/** What one `drover run` measured; bytes and ms. */
interface RunResult {
  readonly steady: number;
  readonly peak: number;
  readonly edits: number[];
  readonly syncs: number[];
  /** VmRSS after the 10th of the reloads in a row, the largest of the first 10, and the largest after them; 0 with fewer than 11 reloads. */
  readonly reloads: { readonly afterTenth: number; readonly largestFirstTen: number; readonly largest: number };
}

/**
 * Run drover on `source` in a fresh network namespace (deleted at the end,
 * also on failure), measure its memory, then time 3 edits made by
 * `edit(n)` (which returns the time of the write, ms since the epoch), then
 * make `reloads` more (`edit(4)`, `edit(5)`, …), each waited for, and
 * measure its VmRSS after each.
 */
async function measureRun(work: string, source: readonly string[], edit: (n: number) => Promise<number>, editedKey: string, reloads = 0): Promise<RunResult> {
  return withNetns(async (netns) => {
    let drover: Drover | undefined;
    try {
      drover = new Drover(netns, source, work);
      await drover.next((l) => l.msg.startsWith('full sync done'), 900_000);
      await new Promise((r) => setTimeout(r, 5000));
      const steady = (await memoryOf(drover.child.pid!)).rss;
      const times: number[] = [];
      const syncs: number[] = [];
      for (let n = 1; n <= 3; n++) {
        const synced = drover.next((l) => l.msg.startsWith('partial sync done') && (l.changed ?? []).includes(editedKey), 120_000);
        const at = await edit(n);
        const line = await synced;
        times.push(Date.parse(line.time) - at);
        syncs.push(line.durationMs ?? NaN);
        await new Promise((r) => setTimeout(r, 1500));
      }
      const peak = (await memoryOf(drover.child.pid!)).hwm;
      let afterTenth = 0;
      let largestFirstTen = 0;
      let largest = 0;
      for (let n = 1; n <= reloads; n++) {
        const synced = drover.next((l) => l.msg.startsWith('partial sync done') && (l.changed ?? []).includes(editedKey), 120_000);
        await edit(3 + n);
        await synced;
        const { rss } = await memoryOf(drover.child.pid!);
        if (n === 10) afterTenth = rss;
        if (n <= 10) largestFirstTen = Math.max(largestFirstTen, rss);
        if (n > 10) largest = Math.max(largest, rss);
      }
      return { steady, peak, edits: times, syncs, reloads: { afterTenth, largestFirstTen, largest } };
    } finally {
      await drover?.stop();
    }
  });
}

const work = await mkdtemp(join(tmpdir(), 'drover-source-scale-'));
try {
  const edited = Math.floor(services / 2);
  const editedKey = `ns-${edited % 50}/svc-${edited}:http`;
  const listDir = join(work, 'list');
  const listFile = join(listDir, 'list.json');
  const objectsDir = join(work, 'objects');
  await mkdir(listDir);
  await mkdir(objectsDir);
  await mkdir(join(work, 'state'));
  await writeFile(listFile, listText());
  for (let i = 0; i < services; i++) {
    const [svc, slice] = objectsOf(i);
    await writeFile(join(objectsDir, `svc-${i}.json`), JSON.stringify(svc));
    await writeFile(join(objectsDir, `svc-${i}-abc.json`), JSON.stringify(slice));
  }
  console.log(`${services} services × ${endpoints} endpoints: List ${MB(Buffer.byteLength(listText()))}, or ${2 * services} files`);
  console.log(`drover run: ${ENTRY === 'dist' ? 'the compiled build (dist/)' : 'the TypeScript sources through tsx (about 90 MB more RSS than the build)'}`);

  // 1. Parse and normalise.
  const loads: number[] = [];
  for (let n = 0; n < (PARTS.has('parse') ? 3 : 0); n++) {
    const source = new FileSource(listFile, { serviceCIDR: SERVICE_CIDR, logger: silentLogger() });
    const t0 = performance.now();
    const r = await source.load();
    loads.push(performance.now() - t0);
    if (r.snapshot.services.size !== services || r.errors.length > 0) throw new Error(`load gave ${r.snapshot.services.size} service ports and ${r.errors.length} errors`);
  }

  // 2 and 3. drover run, on the List (then the reloads in a row) and on one file per object.
  // Each edit of the List is a replace in one text, so that this process does not build a new List for each.
  const base = listText();
  const first = JSON.stringify(objectsOf(edited)[1]);
  const list = PARTS.has('list')
    ? await measureRun(work, ['--source', listDir], (n) => replaceFile(listDir, listFile, base.replace(first, JSON.stringify(objectsOf(edited, n)[1]))), editedKey, reloads)
    : undefined;
  await writeFile(listFile, base);
  const perObject = PARTS.has('objects')
    ? await measureRun(
        work,
        ['--source', objectsDir],
        (n) => replaceFile(objectsDir, join(objectsDir, `svc-${edited}-abc.json`), JSON.stringify(objectsOf(edited, n)[1])),
        editedKey,
      )
    : undefined;

  // 4. The Kubernetes API server double, serving the same objects.
  const api = await FakeKubeApi.start();
  let kubernetes: RunResult | undefined;
  try {
    if (PARTS.has('kubernetes')) {
    for (let i = 0; i < services; i++) for (const o of objectsOf(i)) api.apply(o as ApiObject);
    const kubeconfig = join(work, 'kubeconfig');
    await writeFile(kubeconfig, api.kubeconfig());
    kubernetes = await measureRun(
      work,
      ['--source', 'kubernetes', '--kubeconfig', kubeconfig, '--hostname-override', 'node-a'],
      async (n) => {
        const at = Date.now();
        api.apply(objectsOf(edited, n)[1] as ApiObject);
        return at;
      },
      editedKey,
    );
    }
  } finally {
    await api.close();
  }

  const row = (a: string, b: string) => console.log(`| ${a.padEnd(58)} | ${b} |`);
  console.log('');
  row('', 'measured');
  row('---', '---');
  const memory = (r: RunResult | undefined) => (r ? `${MB(r.steady)} / ${MB(r.peak)}` : 'not run');
  const edits = (r: RunResult | undefined) => (r ? `${secs(median(r.edits))} (the sync itself ${secs(median(r.syncs))})` : 'not run');
  row(`parse and normalise (FileSource load of the List, median of 3)`, loads.length > 0 ? secs(median(loads)) : 'not run');
  row('agent RSS, steady / peak (drover run, List)', memory(list));
  row('agent RSS, steady / peak (drover run, one file per object)', memory(perObject));
  row('one endpoint edited → kernel, List (median of 3)', edits(list));
  row('one endpoint edited → kernel, one file per object (median of 3)', edits(perObject));
  row('agent RSS, steady / peak (drover run, Kubernetes API double)', memory(kubernetes));
  row('one EndpointSlice changed → kernel, Kubernetes API double (median of 3)', edits(kubernetes));
  const percent = (from: number, to: number) => (reloads > 10 ? `${(((to - from) / from) * 100).toFixed(1)} %` : 'needs RELOADS > 10');
  const growth = (from: number, to: number) => `${MB(from)} → ${MB(to)} (${percent(from, to)})`;
  row(`${reloads} reloads in a row (drover run, List): RSS after the 10th → largest after`, list ? growth(list.reloads.afterTenth, list.reloads.largest) : 'not run');
  row(`${reloads} reloads in a row (drover run, List): largest RSS of the first 10 → largest after`, list ? growth(list.reloads.largestFirstTen, list.reloads.largest) : 'not run');
  console.log('\n"→ kernel" is from the rename of the edited file (or the change on the API server double) to the timestamp of the drover log line of the partial sync that wrote the edited service port.');
} finally {
  await rm(work, { recursive: true, force: true });
}
