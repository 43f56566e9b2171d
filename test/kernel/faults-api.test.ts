/**
 * Surviving faults, in iptables mode: the API server gone for 60 s, then
 * back. `drover run --source kubernetes` serves a Service from the API
 * server double (test/support/kube-api.ts) while real TCP traffic runs
 * through its ClusterIP (see faults.test.ts for the counts). While the
 * server is gone, nothing is deleted and traffic keeps flowing; a change
 * made at the server during the outage is applied once it is back, and the
 * kernel then holds what a fresh sync would write.
 */
import test from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { assertConverged, CLUSTER_IP, faultWorld, finish, reached, runFlags, startDrover, synced, traffic } from '../support/faults.ts';
import { FakeKubeApi } from '../support/kube-api.ts';
import { node, service, slice } from '../support/kube-objects.ts';
import { until } from '../support/wait.ts';

const unavailable = await testbedUnavailableReason();
const OUTAGE_MS = 60_000;

if (unavailable) {
  test.skip(`API-server fault test skipped: ${unavailable}`, () => {});
} else {
  test('the API server gone for 60 s, then back: nothing is deleted meanwhile, and what changed is applied after', async (t) => {
    t.timeout(180_000);
    const w = await faultWorld(t);
    const api = await FakeKubeApi.start();
    t.teardown(() => api.close());
    api.apply(service('web', CLUSTER_IP));
    api.apply(slice('web-1', 'web', ['10.180.0.1', '10.180.0.2']));
    api.apply(node('node-a', 'zone-a'));
    const kubeconfig = join(w.scratch, 'kubeconfig');
    await writeFile(kubeconfig, api.kubeconfig());
    const flags = [
      '--source', 'kubernetes', '--kubeconfig', kubeconfig, '--hostname-override', 'node-a', '--netns', w.topo.node,
      '--iptables-backend', 'nft', '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16',
    ];
    const d = startDrover([...flags, ...runFlags(w)]);
    t.teardown(() => d.stop());
    await synced(d, 1, 60_000);
    t.is(await reached(w), 'b1,b2');
    const load = await traffic(t, w);
    const save = async () => (await run('iptables-nft-save', ['-t', 'nat'], { netns: w.topo.node })).stdout.replace(/\[\d+:\d+\]/g, '').replace(/^#.*\n/gm, '');
    const before = await save();

    await api.close();
    const gone = Date.now();
    api.apply(slice('web-1', 'web', ['10.180.0.1', '10.180.0.2', '10.180.0.3']));
    // Halfway and at the end of the outage: drover runs, the rules are unchanged, traffic flows.
    for (const at of [OUTAGE_MS / 2, OUTAGE_MS]) {
      await new Promise((r) => setTimeout(r, gone + at - Date.now()));
      t.true(d.alive, 'drover runs through the outage');
      t.is(await save(), before, `the rules are unchanged ${at / 1000} s into the outage`);
    }
    t.true(d.lines(/^Kubernetes .*: .*; retrying in \d+ ms$/).length > 0, 'the outage is logged');
    await api.up();
    const back = Date.now();
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 60_000, 500);
    t.log(`the change made during the outage was applied ${Date.now() - back} ms after the API server came back`);
    const s = await finish(t, 'API server gone 60 s', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    await assertConverged(t, ['diff', ...flags]);
  });
}
