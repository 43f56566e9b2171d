/**
 * Endpoints derived from Pods, end to end in network namespaces: a folder
 * with a Service and the Pods its selector picks (no EndpointSlice) is read
 * by the file source, synced by the iptables backend, and real connections
 * to the ClusterIP reach exactly the ready Pods, each on the port its named
 * targetPort resolves to. A Pod marked not ready in its manifest stops
 * getting new connections after the partial sync of that one service port.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { SystemIptables } from '../../src/kernel/iptables/exec.ts';
import { FileSource } from '../../src/sources/file.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';

const unavailable = await testbedUnavailableReason();
const CLUSTER_IP = '10.96.0.90';

/** Pod name, IP, the port its container names "http", and whether it is ready. */
const PODS = [
  { name: 'shop-1', ip: '10.244.3.2', port: 8080 },
  { name: 'shop-2', ip: '10.244.3.3', port: 8080 },
  { name: 'canary', ip: '10.244.3.4', port: 8081 },
];

function manifests(notReady: readonly string[]): string {
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'shop', namespace: 'default' },
    spec: { clusterIP: CLUSTER_IP, selector: { app: 'shop' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] },
  };
  const pods = PODS.map((p) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: p.name, namespace: 'default', labels: { app: 'shop' } },
    spec: { nodeName: 'node-1', containers: [{ name: 'shop', ports: [{ name: 'http', containerPort: p.port }] }] },
    status: { phase: 'Running', podIP: p.ip, conditions: [{ type: 'Ready', status: notReady.includes(p.name) ? 'False' : 'True' }] },
  }));
  // A Pod of another app, which the selector must not pick.
  const other = { ...pods[0]!, metadata: { name: 'other', namespace: 'default', labels: { app: 'other' } }, status: { ...pods[0]!.status, podIP: '10.244.3.9' } };
  return [service, ...pods, other].map((o) => JSON.stringify(o)).join('\n---\n');
}

if (unavailable) {
  test.skip(`Pod data-path tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('connections reach the ready Pods a selector picks, on each Pod\'s own port; a Pod marked not ready stops getting them after a partial sync', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-pods-'));
    let topo: Topology | undefined;
    t.teardown(async () => {
      await topo?.destroy();
      await rm(dir, { recursive: true, force: true });
    });
    topo = await createTopology({
      backends: [...PODS.map((p) => ({ name: p.name, ip: p.ip, ports: [p.port] })), { name: 'other', ip: '10.244.3.9', ports: [8080] }],
      clients: [{ name: 'inside', ip: '10.244.9.2' }],
    });
    const file = join(dir, 'shop.yaml');
    await writeFile(file, manifests([]));
    const source = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
    const backend = new IptablesBackend({
      exec: new SystemIptables({ variant: 'nft', netns: topo.node }),
      render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false },
      logger: silentLogger(),
    });
    const first = await source.load();
    t.deepEqual(first.errors, []);
    await backend.sync(first.snapshot, { full: true, changed: new Set() });

    const before = await probe(topo, { from: topo.client('inside').netns, host: CLUSTER_IP, port: 80, count: 60 });
    t.deepEqual(Object.keys(before.counts).sort(), ['canary', 'shop-1', 'shop-2']);
    t.deepEqual(before.errors, {});
    t.true(before.results.every((r) => r.ok && r.reply.port === PODS.find((p) => p.name === r.reply.backend)!.port), 'each Pod answers on its own named port');

    await writeFile(file, manifests(['shop-2']));
    const second = await source.load();
    t.deepEqual(second.changed, new Set(['default/shop:http']));
    await backend.sync(second.snapshot, { full: false, changed: second.changed! });
    const after = await probe(topo, { from: topo.client('inside').netns, host: CLUSTER_IP, port: 80, count: 60 });
    t.deepEqual(Object.keys(after.counts).sort(), ['canary', 'shop-1']);
    t.deepEqual(after.errors, {});
  });
}
