/**
 * The Kubernetes source at scale against the real API server (the test API
 * server of test/peers/, built by scripts/peers/build.sh; root, for the
 * network namespace):
 *
 *   tsx scripts/peers/kubernetes-scale.ts [SERVICES [ENDPOINTS]]   # default 10000 10
 *
 * drover runs as deploy/'s ServiceAccount (a TokenRequest token) with
 * `drover run --source kubernetes --netns NS` (iptables-nft) in a network
 * namespace of its own, created here and deleted at the end, also on
 * failure. It measures:
 *
 *   1. created through the API while drover runs: SERVICES Services (50
 *      namespaces, ClusterIPs allocated by the API server) and one
 *      EndpointSlice of ENDPOINTS endpoints each, written as the
 *      EndpointSlice controller writes them, 32 requests in flight; the
 *      time the writes took, and from the first write until drover's sync
 *      log shows every service port programmed;
 *   2. drover's RSS (VmRSS from /proc) 5 s after that (steady) and its
 *      VmHWM (peak);
 *   3. 3 times one EndpointSlice changed through the API, timed from the
 *      write to the `partial sync done` log line naming its service port;
 *   4. a second `drover run` started on the full API server: from its start
 *      to its first `full sync done`, and its RSS 5 s after (steady).
 *
 * Each `drover run` runs the compiled build when there is one (`npm run
 * build`), as a node does, else the TypeScript sources through tsx (about
 * 90 MB more RSS); DROVER_ENTRY chooses. Prints a table.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installedEntry, parseProcMemory } from '../../src/bench/drover-process.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { startDrover, type RunningDrover } from '../../test/support/faults.ts';
import { until } from '../../test/support/wait.ts';
import { TestApiServer } from '../../test/cluster/support/apiserver.ts';
import { createNamespace, endpointSliceObject, serviceObject, writeEndpointSlice } from '../../test/cluster/support/objects.ts';
import { locatePeers } from '../../test/cluster/support/peers.ts';
import { applyDeployRbac, serviceAccountToken, writeKubeconfig } from '../../test/cluster/support/rbac.ts';
import { pool } from './pool.ts';

const [services = 10_000, endpoints = 10] = process.argv.slice(2).map(Number);
const NAMESPACES = 50;
const IN_FLIGHT = 32;
const ENTRY = installedEntry();
const peers = locatePeers();
if (peers === undefined) {
  console.error('the real peers are not built: run scripts/peers/build.sh');
  process.exit(1);
}

const MB = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MB`;
const secs = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const nsOf = (i: number) => `ns-${i % NAMESPACES}`;

/** VmRSS and VmHWM of process `pid`, bytes. */
async function memoryOf(pid: number): Promise<{ rss: number; hwm: number }> {
  const { rssKb, hwmKb } = parseProcMemory(await readFile(`/proc/${pid}/status`, 'utf8'));
  return { rss: rssKb * 1024, hwm: hwmKb * 1024 };
}

/** The EndpointSlice of service `i` (ENDPOINTS endpoints; `edit` moves the first one). */
function sliceOf(i: number, uid: string, edit = 0) {
  const eps = Array.from({ length: endpoints }, (_, e) => {
    const k = i * endpoints + e;
    const ip = e === 0 && edit > 0 ? `10.250.${(edit >> 8) & 255}.${edit & 255}` : `10.${128 + (k >> 16)}.${(k >> 8) & 255}.${k & 255}`;
    return { ip, pod: `svc-${i}-${e}`, nodeName: 'node-a' };
  });
  return endpointSliceObject(nsOf(i), `svc-${i}-abcde`, { name: `svc-${i}`, uid }, 'IPv4', eps);
}

/** The service ports drover's last sync reported programmed (the `services` field of its sync log line). */
const programmed = (d: RunningDrover) => (d.lines(/sync done/).at(-1)?.services as number | undefined) ?? 0;

const work = await mkdtemp(join(tmpdir(), 'drover-kubernetes-scale-'));
const api = await TestApiServer.start(peers.testApiserver, { serviceClusterIPRange: '10.96.0.0/16', apiserverArgs: ['--max-requests-inflight=800', '--max-mutating-requests-inflight=400'] });
try {
  await applyDeployRbac(api);
  const kubeconfig = await writeKubeconfig(api, await serviceAccountToken(api, 'kube-system', 'drover'), join(work, 'kubeconfig'));
  for (let n = 0; n < NAMESPACES; n++) await createNamespace(api, `ns-${n}`);
  const flags = (name: string, netns: string) => [
    '--source', 'kubernetes', '--kubeconfig', kubeconfig, '--hostname-override', 'node-a', '--netns', netns, '--iptables-backend', 'nft',
    '--cluster-cidr', '10.128.0.0/9', '--service-cidr', '10.96.0.0/16', '--state-dir', join(work, `${name}.state`), '--status-file', join(work, `${name}.status.json`),
    '--metrics-bind-address', '', '--healthz-bind-address', '',
  ];
  const env = { DROVER_ENTRY: ENTRY };
  const uids: string[] = [];
  const result = await withNetns(async (netns) => {
    // 1-3: drover runs while everything is created.
    const d = startDrover(flags('first', netns), { env });
    try {
      await until('drover synced on the empty API server', async () => d.lines(/full sync done/).length > 0, 300_000, 200);
      const t0 = Date.now();
      await pool(services, IN_FLIGHT, async (i) => {
        const s = await api.must<{ metadata: { uid: string } }>('POST', `/api/v1/namespaces/${nsOf(i)}/services`, serviceObject(nsOf(i), `svc-${i}`, {}));
        uids[i] = s.metadata.uid;
        await api.must('POST', `/apis/discovery.k8s.io/v1/namespaces/${nsOf(i)}/endpointslices`, sliceOf(i, s.metadata.uid));
      });
      const written = Date.now() - t0;
      // Plus the "kubernetes" Service of the default namespace (https, no endpoints).
      await until('every service port programmed', async () => programmed(d) >= services + 1, 1_800_000, 500);
      const allProgrammed = Date.now() - t0;
      await new Promise((r) => setTimeout(r, 5000));
      const steady = (await memoryOf(d.pid)).rss;
      const edited = Math.floor(services / 2);
      const key = `${nsOf(edited)}/svc-${edited}:http`;
      const edits: number[] = [];
      for (let n = 1; n <= 3; n++) {
        const before = d.lines(/partial sync done/).length;
        const at = Date.now();
        await writeEndpointSlice(api, sliceOf(edited, uids[edited]!, n));
        await until(`edit ${n} programmed`, async () => d.lines(/partial sync done/).slice(before).some((l) => (l.changed as string[] | undefined)?.includes(key)), 120_000, 50);
        const line = d.lines(/partial sync done/).slice(before).find((l) => (l.changed as string[] | undefined)?.includes(key))!;
        edits.push(Date.parse(line.time as string) - at);
        await new Promise((r) => setTimeout(r, 1500));
      }
      const peak = (await memoryOf(d.pid)).hwm;
      await d.stop();
      // 4: a second drover on the full API server.
      const started = Date.now();
      const second = startDrover(flags('second', netns), { env });
      try {
        await until('the second drover synced', async () => second.lines(/full sync done/).length > 0, 1_800_000, 200);
        const fullSync = Date.parse(second.lines(/full sync done/)[0]!.time as string) - started;
        await new Promise((r) => setTimeout(r, 5000));
        const secondSteady = (await memoryOf(second.pid)).rss;
        return { written, allProgrammed, steady, peak, edits, fullSync, secondSteady, secondPeak: (await memoryOf(second.pid)).hwm };
      } finally {
        await second.stop();
      }
    } finally {
      await d.stop();
    }
  });
  const row = (a: string, b: string) => console.log(`| ${a.padEnd(80)} | ${b} |`);
  console.log(`\n${services} Services × ${endpoints} endpoints through the real kube-apiserver; drover run: ${ENTRY === 'dist' ? 'the compiled build (dist/)' : 'the TypeScript sources through tsx'}\n`);
  row('', 'measured');
  row('---', '---');
  row(`writing the ${services} Services and ${services} EndpointSlices (${IN_FLIGHT} in flight)`, secs(result.written));
  row('from the first write until drover programmed every service port', secs(result.allProgrammed));
  row('drover run RSS, steady / peak', `${MB(result.steady)} / ${MB(result.peak)}`);
  row('one EndpointSlice changed through the API → partial sync logged (median of 3)', secs(median(result.edits)));
  row('a new drover run on the full API server: start → first full sync done', secs(result.fullSync));
  row('that drover run RSS, steady / peak', `${MB(result.secondSteady)} / ${MB(result.secondPeak)}`);
} finally {
  await api.destroy();
  await rm(work, { recursive: true, force: true });
}
