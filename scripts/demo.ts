/**
 * drover's demo (`sudo npm run demo`): Service traffic load-balanced by the
 * kernel rules drover writes, inside network namespaces this script creates
 * and removes (also on Ctrl-C). The host's own network is not touched.
 *
 * 1. Reads examples/ (a kubectl dump with the `linkding` Service, a
 *    Shepherd `web-service`, and in examples/pods the Service `shop` with
 *    the Pods its selector picks) and builds one backend namespace per
 *    endpoint (named after its Pod when it has one), each serving HTTP that
 *    answers with its own name, plus a node namespace and a client
 *    namespace.
 * 2. Runs `drover run` in the node namespace on a copy of examples/.
 * 3. Resolves each Service's name from the client (`dig` against the DNS
 *    server drover serves with `--dns-address`), sends requests to the
 *    ClusterIP it answered and prints the spread.
 * 4. Removes one endpoint from the copy of the Shepherd manifest, waits for
 *    drover's partial sync, and shows that new requests no longer reach it.
 * 5. Marks one of shop's Pods not ready in the copy of its manifest (its
 *    Ready condition False), waits for the partial sync, and shows that new
 *    requests no longer reach that Pod.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ServicePort } from '../src/model/types.ts';
import { FileSource } from '../src/sources/file.ts';
import { run } from '../src/kernel/exec.ts';
import { probe } from '../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type BackendSpec, type Topology } from '../src/testbed/topology.ts';
import { silentLogger } from '../src/util/log.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLUSTER_CIDR = '10.244.0.0/16';
const REQUESTS = 30;
const SHEPHERD_FILE = 'shepherd.json';
const POD_FILE = join('pods', 'shop.yaml');

function say(text = ''): void {
  process.stdout.write(`${text}\n`);
}

/** One backend namespace per endpoint IP, named after its Pod, or else after the first service it serves. */
function backendsFor(services: Iterable<ServicePort>): BackendSpec[] {
  const byIp = new Map<string, BackendSpec>();
  const perName = new Map<string, number>();
  for (const sp of services) {
    for (const ep of sp.endpoints) {
      let b = byIp.get(ep.ip);
      if (!b) {
        const pod = ep.pod?.split('/')[1];
        const n = (perName.get(sp.name) ?? 0) + 1;
        if (pod === undefined) perName.set(sp.name, n);
        b = { name: pod !== undefined && /^[a-z0-9][a-z0-9-]{0,19}$/.test(pod) ? pod : `${sp.name.slice(0, 12)}-${n}`, ip: ep.ip, ports: [] };
        byIp.set(ep.ip, b);
      }
      if (!b.ports.includes(ep.port)) b.ports.push(ep.port);
    }
  }
  return [...byIp.values()];
}

/** A count of the sync log line's `written` or `deleted` objects by kind (0 when absent). */
function logCount(entry: Record<string, unknown>, field: 'written' | 'deleted', kind: string): number {
  return ((entry[field] as Record<string, number> | undefined) ?? {})[kind] ?? 0;
}

/** drover's JSON log lines, with a way to wait for a message. */
class DroverLog {
  private readonly seen: Array<Record<string, unknown>> = [];
  private waiters: Array<() => void> = [];

  constructor(child: ChildProcess) {
    createInterface({ input: child.stderr! }).on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        say(`  drover: ${line}`);
        return;
      }
      this.seen.push(entry);
      // drover's JSON lines name their level.
      if (typeof entry.msg === 'string' && ['warn', 'error', 'fatal'].includes(entry.level as string)) say(`  drover ${entry.level === 'warn' ? 'warning' : 'error'}: ${entry.msg}${entry.err ? ` (${entry.err})` : ''}`);
      for (const w of this.waiters) w();
    });
  }

  /** The next entry after index `from` whose msg matches, within `timeoutMs`. */
  async waitFor(msg: RegExp, from: number, timeoutMs: number): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.seen.slice(from).find((e) => typeof e.msg === 'string' && msg.test(e.msg));
      if (hit) return hit;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`drover did not log ${msg} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      this.waiters = [];
    }
  }

  get length(): number {
    return this.seen.length;
  }
}

function bar(n: number, total: number): string {
  return '#'.repeat(Math.round((n / total) * 40));
}

/** The address drover's DNS server listens on in the demo (NodeLocal DNSCache's). */
const DNS_ADDRESS = '169.254.20.10';

/** The A records of `name` asked from the client namespace with dig, or undefined when dig is missing or failed. */
async function resolveFromClient(topo: Topology, name: string): Promise<string | undefined> {
  const r = await run('dig', [`@${DNS_ADDRESS}`, '+short', '+time=2', '+tries=2', name, 'A'], { netns: topo.client().netns, allowFail: true }).catch(() => undefined);
  return r?.code === 0 && r.stdout.trim() !== '' ? r.stdout.trim().split('\n')[0] : undefined;
}

async function spread(topo: Topology, sp: ServicePort, label: string): Promise<Record<string, number>> {
  const name = `${sp.name}.${sp.namespace}.svc.cluster.local`;
  const resolved = await resolveFromClient(topo, name);
  say(`  ${label}: ${name} resolves to ${resolved ?? '(no answer: is dig installed?)'} (dig @${DNS_ADDRESS} from the client)`);
  const host = resolved ?? sp.clusterIP;
  const s = await probe(topo, { host, port: sp.port, count: REQUESTS });
  say(`  ${label}: ${REQUESTS} new connections from the client to ${host}:${sp.port}`);
  for (const [name, n] of Object.entries(s.counts).sort()) say(`    ${name.padEnd(16)} ${String(n).padStart(3)}  ${bar(n, REQUESTS)}`);
  for (const [code, n] of Object.entries(s.errors)) say(`    ${code.padEnd(16)} ${String(n).padStart(3)}  (failed)`);
  return s.counts;
}

async function main(): Promise<number> {
  const reason = await testbedUnavailableReason();
  if (reason) {
    say(`drover demo: cannot run: ${reason}`);
    return 1;
  }
  const work = await mkdtemp(join(tmpdir(), 'drover-demo-'));
  let topo: Topology | undefined;
  let drover: ChildProcess | undefined;
  const stop = async () => {
    drover?.kill('SIGTERM');
    await topo?.destroy();
    await rm(work, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void stop().then(() => process.exit(130)));
  try {
    const manifests = join(work, 'manifests');
    await cp(join(ROOT, 'examples'), manifests, { recursive: true });
    const { snapshot } = await new FileSource(manifests, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() }).load();
    const services = [...snapshot.services.values()].filter((sp) => sp.endpoints.length > 0);
    say('drover demo');
    say(`  manifests: ${manifests} (a copy of examples/)`);
    for (const sp of services) {
      const eps = sp.endpoints.map((e) => `${e.ip}:${e.port}${e.pod ? ` (Pod ${e.pod})` : ''}`);
      say(`  ${sp.key}: ClusterIP ${sp.clusterIP}:${sp.port}${sp.clusterIPAllocated ? ' (allocated by drover)' : ''} -> ${eps.join(', ')}`);
    }

    topo = await createTopology({ backends: backendsFor(services), clients: [{ name: 'client', ip: '192.168.100.2' }] });
    say(`  namespaces: node ${topo.node}, client ${topo.client().netns}, ${topo.backends.length} backends`);

    drover = spawn(
      'ip',
      ['netns', 'exec', topo.node, process.execPath, join(ROOT, 'bin/drover.js'), 'run', '--source', manifests, '--cluster-cidr', CLUSTER_CIDR, '--min-sync-period', '1s', '--status-file', join(work, 'status.json'), '--state-dir', join(work, 'state'), '--dns-address', DNS_ADDRESS],
      { stdio: ['ignore', 'inherit', 'pipe'] },
    );
    const log = new DroverLog(drover);
    const first = await log.waitFor(/full sync done/, 0, 30_000);
    say(`\n1. drover synced: ${logCount(first, 'written', 'chain')} chains and ${logCount(first, 'written', 'rule')} rules in ${first.durationMs} ms (iptables-restore ${first.applyMs} ms)`);
    for (const sp of services) await spread(topo, sp, sp.key);

    const web = services.find((sp) => sp.name === 'web-service');
    if (!web) throw new Error('examples/ has no web-service');
    const removed = web.endpoints.at(-1)!;
    const removedName = topo.backends.find((b) => b.ip === removed.ip)!.name;
    const file = join(manifests, SHEPHERD_FILE);
    const manifest = JSON.parse(await readFile(file, 'utf8')) as { status: { endpoints: string[] } };
    manifest.status.endpoints = manifest.status.endpoints.filter((e) => e !== `${removed.ip}:${removed.port}`);
    const mark = log.length;
    const editedAt = Date.now();
    await writeFile(file, `${JSON.stringify(manifest, null, 2)}\n`);
    say(`\n2. removed endpoint ${removed.ip}:${removed.port} (${removedName}) from ${SHEPHERD_FILE}`);
    const partial = await log.waitFor(/partial sync done/, mark, 10_000);
    say(`   drover saw the change and synced in ${Date.now() - editedAt} ms after the edit: partial sync of ${JSON.stringify(partial.changed)}, ${logCount(partial, 'written', 'chain')} chain written, ${logCount(partial, 'deleted', 'chain')} deleted, iptables-restore ${partial.applyMs} ms`);
    const chains = (await run('iptables-save', ['-t', 'nat'], { netns: topo.node })).stdout
      .split('\n')
      .filter((l) => l.includes(`"${web.key} -> `));
    say('   the service chain now reads:');
    for (const l of chains) say(`     ${l}`);
    const after = await spread(topo, web, web.key);
    if (after[removedName]) throw new Error(`${removedName} still got ${after[removedName]} connections after its removal`);
    say(`\n   ${removedName} gets no new connections.`);

    await podNotReady(topo, services, log, join(manifests, POD_FILE));
    say('\n   Cleaning up the namespaces.');
    return 0;
  } catch (err) {
    say(`drover demo failed: ${(err as Error).message}`);
    return 1;
  } finally {
    await stop();
  }
}

/**
 * Step 5: mark the last Pod-derived endpoint of shop not ready in `file`
 * (its Pod's Ready condition "True" → "False"), wait for the partial sync,
 * and check that new connections no longer reach it.
 * @throws Error when examples/pods has no such Pod, or the Pod still gets connections.
 */
async function podNotReady(topo: Topology, services: readonly ServicePort[], log: DroverLog, file: string): Promise<void> {
  const shop = services.find((sp) => sp.name === 'shop');
  const target = shop?.endpoints.filter((e) => e.pod !== undefined && e.ready).at(-1);
  if (!shop || !target) throw new Error(`examples/${POD_FILE} has no ready Pod of Service shop`);
  const podName = target.pod!.split('/')[1]!;
  const docs = (await readFile(file, 'utf8')).split(/^---$/m);
  const i = docs.findIndex((d) => new RegExp(`^kind: Pod$[\\s\\S]*^  name: ${podName}$`, 'm').test(d));
  if (i < 0 || !docs[i]!.includes('{type: Ready, status: "True"}')) throw new Error(`cannot find the Ready condition of Pod ${podName} in ${POD_FILE}`);
  docs[i] = docs[i]!.replace('{type: Ready, status: "True"}', '{type: Ready, status: "False"}');
  const mark = log.length;
  const editedAt = Date.now();
  await writeFile(file, docs.join('---'));
  say(`\n3. marked Pod ${target.pod} (${target.ip}:${target.port}) not ready in ${POD_FILE}: its Ready condition is now False`);
  const partial = await log.waitFor(/partial sync done/, mark, 10_000);
  say(`   drover saw the change and synced in ${Date.now() - editedAt} ms after the edit: partial sync of ${JSON.stringify(partial.changed)}, ${logCount(partial, 'written', 'chain')} chain written, ${logCount(partial, 'deleted', 'chain')} deleted, iptables-restore ${partial.applyMs} ms`);
  const after = await spread(topo, shop, shop.key);
  if (after[podName]) throw new Error(`${podName} still got ${after[podName]} connections after it was marked not ready`);
  say(`\n   ${podName} is not ready, so it gets no new connections.`);
}

process.exitCode = await main();
