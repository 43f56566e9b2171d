/**
 * The same packet-flow case through each of drover's three sources: one
 * cluster (test/support/flow-cluster.ts: Service default/web with b1 and b2
 * ready and b3 not ready) given as manifest files, through the Kubernetes
 * API server double and through the Shepherd API server double. Each time
 * `drover sync --once` programs a fresh node namespace (`--netns`: drover,
 * and so its HTTP client, stays in this namespace, where the doubles
 * listen on loopback), and real TCP connections from the client must reach
 * b1 and b2 and never b3, whose echo server answers when asked directly.
 */
import test, { type ExecutionContext } from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { FLOW_CLUSTER_CIDR, FLOW_CLUSTER_IP, FLOW_ENDPOINTS, FLOW_READY, FLOW_TARGET_PORT, flowKubernetesObjects, flowManifest, flowShepherdService, reached, withFlowTopology } from '../support/flow-cluster.ts';
import { FakeKubeApi } from '../support/kube-api.ts';
import { node } from '../support/kube-objects.ts';
import { FakeShepherd } from '../support/shepherd-api.ts';
import { DROVER } from '../support/drover-bin.ts';

const unavailable = await testbedUnavailableReason();

/** Run drover with `args`; its exit code and output. */
const drover = (args: readonly string[]) => run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 90_000 });

/**
 * `drover sync --once` from `source` (and `extra` flags) into the topology's
 * node namespace, then 30 connections to `clusterIP(…)`:80 from the client:
 * they must all be answered, by exactly the ready endpoints.
 * @param clusterIP where to connect, found once drover has synced.
 */
async function syncAndProbe(t: ExecutionContext, topo: Topology, source: string, extra: readonly string[], clusterIP: () => Promise<string>): Promise<void> {
  // b3's echo server is up: only drover's rules keep connections from it.
  t.deepEqual(await reached(topo, FLOW_ENDPOINTS[2].ip, FLOW_TARGET_PORT, 1), { backends: ['b3'], errors: {} });
  const args = ['sync', '--once', '--source', source, '--netns', topo.node, '--iptables-backend', 'nft', '--cluster-cidr', FLOW_CLUSTER_CIDR, ...extra];
  const sync = await drover(args);
  t.is(sync.code, 0, sync.stderr);
  const ip = await clusterIP();
  t.deepEqual(await reached(topo, ip, 80, 30), { backends: FLOW_READY, errors: {} }, `connections to ${ip}:80`);
}

/** The ClusterIP of default/web:http in the kernel of `netns`, from the KUBE-SERVICES rule `drover chains --json` shows for it. */
async function liveClusterIP(t: ExecutionContext, netns: string): Promise<string> {
  const r = await drover(['chains', 'default/web:http', '--json', '--netns', netns, '--iptables-backend', 'nft']);
  t.is(r.code, 0, r.stderr);
  const views = JSON.parse(r.stdout) as Array<{ servicePort: string; chains: Array<{ chain: string; rules: string[] }> }>;
  const entry = views.find((v) => v.servicePort === 'default/web:http')?.chains.find((c) => c.chain === 'KUBE-SERVICES');
  const ip = /-d (\d+\.\d+\.\d+\.\d+)\/32 /.exec(entry?.rules.join('\n') ?? '')?.[1];
  if (!ip) throw new Error(`no KUBE-SERVICES rule for default/web:http in ${r.stdout}`);
  return ip;
}

if (unavailable) {
  test.skip(`packet flow through the three sources skipped: ${unavailable}`, () => {});
} else {
  let dir: string;
  test.before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'drover-sources-flow-'));
  });
  test.after.always(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test.serial('manifest files (the file source): connections reach exactly the ready endpoints', async (t) => {
    const source = join(dir, 'manifests.json');
    await writeFile(source, flowManifest());
    await withFlowTopology((topo) => syncAndProbe(t, topo, source, [], async () => FLOW_CLUSTER_IP));
  });

  test.serial('the Kubernetes API (--source kubernetes): connections reach exactly the ready endpoints', async (t) => {
    const api = await FakeKubeApi.start();
    t.teardown(() => api.close());
    for (const o of [...flowKubernetesObjects(), node('node-a', 'zone-a')]) api.apply(o);
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, api.kubeconfig());
    await withFlowTopology((topo) =>
      syncAndProbe(t, topo, 'kubernetes', ['--kubeconfig', kubeconfig, '--hostname-override', 'node-a'], async () => FLOW_CLUSTER_IP),
    );
  });

  test.serial('a Shepherd API server (--source shepherd+http://…): connections to the ClusterIP drover allocated reach exactly the ready endpoints', async (t) => {
    const server = await FakeShepherd.start();
    t.teardown(() => server.stop());
    server.set('default', [flowShepherdService()]);
    await withFlowTopology(async (topo) => {
      await syncAndProbe(t, topo, server.source, ['--state-dir', join(dir, 'shepherd-state')], async () => {
        const ip = await liveClusterIP(t, topo.node);
        t.regex(ip, /^10\.(9[6-9]|10\d|11[01])\.\d+\.\d+$/, 'allocated from the default --service-cidr, 10.96.0.0/12');
        return ip;
      });
    });
  });
}
