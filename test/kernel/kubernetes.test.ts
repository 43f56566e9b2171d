/**
 * Packets through the rules `drover run --source kubernetes` programs from
 * the API server double (test/support/kube-api.ts), in fresh network
 * namespaces with the nf_tables iptables: the Service is served once the
 * first lists are in; an EndpointSlice change moves traffic; a change made
 * while the watch is cut, and one made while the history expired (410), are
 * both applied.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { FakeKubeApi } from '../support/kube-api.ts';
import { node, service, slice } from '../support/kube-objects.ts';
import { until } from '../support/wait.ts';
import { DROVER } from '../support/drover-bin.ts';

const unavailable = await testbedUnavailableReason();

if (unavailable) {
  test.skip(`Kubernetes-source kernel tests skipped: ${unavailable}`, () => {});
} else {
  let topo: Topology;
  let dir: string;
  test.before(async () => {
    topo = await createTopology({
      backends: [
        { name: 'b1', ip: '10.180.0.1', ports: [8080] },
        { name: 'b2', ip: '10.180.0.2', ports: [8080] },
      ],
      serviceCidr: '172.30.0.0/16',
    });
    dir = await mkdtemp(join(tmpdir(), 'drover-k8s-kernel-'));
  });
  test.after.always(async () => {
    await topo?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Which backends answered 6 connections to the Service's ClusterIP. */
  const reached = async () => {
    const r = await probe(topo, { host: '172.30.0.50', port: 80, count: 6, timeoutMs: 1000 });
    return Object.keys(r.counts).sort().join(',');
  };

  test.serial('drover run --source kubernetes serves the Service and follows its EndpointSlice through a dropped watch and a 410', async (t) => {
    const api = await FakeKubeApi.start();
    t.teardown(() => api.close());
    api.holdLists('endpointslices');
    api.apply(service('web', '172.30.0.50'));
    api.apply(slice('web-1', 'web', ['10.180.0.1']));
    api.apply(node('node-a', 'zone-a'));
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, api.kubeconfig());
    const args = ['run', '--source', 'kubernetes', '--kubeconfig', kubeconfig, '--hostname-override', 'node-a', '--netns', topo.node, '--iptables-backend', 'nft'];
    // With --netns the servers would listen on the host (the health server on every address): off.
    const flags = ['--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16', '--min-sync-period', '200ms', '--status-file', join(dir, 'status.json'), '--metrics-bind-address', '', '--healthz-bind-address', ''];
    const child = spawn(process.execPath, [DROVER, ...args, ...flags], { stdio: ['ignore', 'ignore', 'pipe'] });
    let logs = '';
    child.stderr.on('data', (b: Buffer) => (logs += b.toString()));
    try {
      await until('the Service list', async () => api.lists('/api/v1/services').length > 0, 60_000);
      await new Promise((r) => setTimeout(r, 1000));
      t.false(logs.includes('sync done'), 'no sync while the EndpointSlices are not listed');
      api.releaseLists();
      await until('b1 served', async () => (await reached()) === 'b1', 30_000);

      api.apply(slice('web-1', 'web', ['10.180.0.2']));
      await until('b2 served', async () => (await reached()) === 'b2', 30_000);

      api.dropWatches();
      api.apply(slice('web-1', 'web', ['10.180.0.1', '10.180.0.2']));
      await until('both served after the dropped watch', async () => (await reached()) === 'b1,b2', 30_000);

      api.dropWatches();
      api.apply(slice('web-1', 'web', ['10.180.0.1']));
      api.expire();
      await until('b1 alone after the relist', async () => (await reached()) === 'b1', 30_000);
      t.pass();
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    t.false(/"level":"(error|fatal)"/.test(logs), logs);
  });
}
