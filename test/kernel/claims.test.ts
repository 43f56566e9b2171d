/**
 * Frontend claims with real traffic, in iptables and nftables mode (drover
 * run inside the node namespace of a world of its own, removed also on
 * failure):
 *
 *   - a ClusterIP clash: default/web serves 172.30.0.50:80 to steady
 *     traffic; aaa/clash, created later (and first by name), is added on
 *     the same ClusterIP:port and refused; drover is restarted and web's
 *     clients keep working: the winner is the Service created first, not
 *     the one served before nor the first by name; `render` agrees;
 *   - the node-port range and a NodePort clash: a NodePort of 22 is refused
 *     (a connection to the node on 22 reaches no backend); a Service whose
 *     NodePort is changed to one an earlier-created Service has keeps its
 *     ClusterIP serving under traffic, and across a restart the NodePort
 *     stays with the earlier Service.
 */
import test, { type ExecutionContext } from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { probe, startTraffic, type Traffic } from '../../src/testbed/probe.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { CLUSTER_IP, drover, finish, manifestWorld, type ManifestWorld, reached, runFlags, startDrover, synced, traffic, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';

const unavailable = await testbedUnavailableReason();

const MODES = ['iptables', 'nftables'] as const;
type Mode = (typeof MODES)[number];

/** A v1 Service manifest: one TCP port 80, `nodePort` when given (then type NodePort). */
function service(ns: string, name: string, ip: string, created: string, nodePort?: number): string {
  const port = nodePort === undefined ? '{name: http, port: 80, protocol: TCP}' : `{name: http, port: 80, protocol: TCP, nodePort: ${nodePort}}`;
  return `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: ${ns}, creationTimestamp: "${created}"}\nspec: {type: ${nodePort === undefined ? 'ClusterIP' : 'NodePort'}, clusterIP: ${ip}, ports: [${port}]}\n`;
}

/** Its EndpointSlice: the backends at `ips`, port 8080. */
function slice(ns: string, name: string, ips: readonly string[]): string {
  return (
    `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ${name}-1, namespace: ${ns}, labels: {kubernetes.io/service-name: ${name}}}\naddressType: IPv4\n` +
    `ports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n${ips.map((ip) => `  - {addresses: [${ip}], conditions: {ready: true}}\n`).join('')}`
  );
}

const B1 = '10.180.0.1';
const B2 = '10.180.0.2';
const B3 = '10.180.0.3';

/** The flags of `render` (which reads no kernel), and those of the commands that do (`kernel`). */
const flags = (w: ManifestWorld, mode: Mode, kernel = true) => [
  '--mode', mode, '--source', w.source, '--state-dir', join(w.scratch, 'state'), '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16',
  ...(mode === 'iptables' && kernel ? ['--iptables-backend', 'nft'] : []),
];

/** drover run in the node namespace, synced once. */
async function start(t: ExecutionContext, w: ManifestWorld, mode: Mode): Promise<RunningDrover> {
  const d = startDrover([...flags(w, mode), ...runFlags(w)], { netns: w.topo.node });
  t.teardown(() => d.stop());
  await synced(d, 1);
  return d;
}

/** The backends that answered 30 new connections to host:port from the client, sorted and joined by commas ("" when none did). */
async function backendsAt(w: ManifestWorld, host: string, port: number): Promise<string> {
  const r = await probe(w.topo, { host, port, count: 30, timeoutMs: 1000 });
  return Object.keys(r.counts).sort().join(',');
}

/** The kernel holds what a fresh full sync would write. */
async function converged(t: ExecutionContext, w: ManifestWorld, mode: Mode): Promise<void> {
  const diff = await drover(['diff', ...flags(w, mode)], { netns: w.topo.node });
  t.deepEqual([diff.code, diff.stdout], [0, 'no differences\n'], diff.stderr);
}

if (unavailable) {
  test.skip(`frontend claim tests skipped: ${unavailable}`, () => {});
} else {
  for (const mode of MODES) {
    test.serial(`${mode}: a ClusterIP clash stays with the Service created first, across a restart, under traffic`, async (t) => {
      const w = await manifestWorld(t, `${service('default', 'web', CLUSTER_IP, '2025-01-01T00:00:00Z')}---\n${slice('default', 'web', [B1, B2])}`);
      const d = await start(t, w, mode);
      const load = await traffic(t, w);
      // aaa/clash: created later, first by name, no endpoints (whoever gets the ClusterIP with it rejects new connections).
      await writeFile(join(w.source, 'clash.yaml'), service('aaa', 'clash', CLUSTER_IP, '2025-06-01T00:00:00Z'));
      await until('the clash refused', async () => d.lines(/aaa\/clash.*is already used by Service default\/web/).length > 0, 30_000);
      const beforeRestart = await reached(w);
      await d.stop();
      const again = await start(t, w, mode);
      // Traffic a while longer after the restart's first sync; the counts are logged before anything is checked.
      await new Promise((r) => setTimeout(r, 2000));
      const s = await finish(t, `${mode}: ClusterIP clash, restart`, load);
      t.is(beforeRestart, 'b1,b2');
      t.is(s.failed, 0, JSON.stringify(s.errors));
      t.is(await reached(w), 'b1,b2', 'after the restart, web keeps its ClusterIP');
      t.is(again.lines(/is already used by Service default\/web/).length, 1, 'the loser named in one warning');
      const render = await drover(['render', ...flags(w, mode, false)], { netns: w.topo.node });
      t.is(render.code, 0, render.stderr);
      t.regex(render.stderr, /Service aaa\/clash: spec\.ports\[0\]: 172\.30\.0\.50:80\/TCP is already used by Service default\/web \(.*web\.yaml\), created earlier; service skipped/);
      await converged(t, w, mode);
    });

    test.serial(`${mode}: a NodePort out of range is refused; a NodePort clash leaves the later Service's ClusterIP serving, across a restart`, async (t) => {
      const LATER_IP = '172.30.0.51';
      const later = (nodePort: number) => `${service('aaa', 'later', LATER_IP, '2025-02-01T00:00:00Z', nodePort)}---\n${slice('aaa', 'later', [B3])}`;
      const w = await manifestWorld(
        t,
        [
          service('zzz', 'first', CLUSTER_IP, '2025-01-01T00:00:00Z', 30080),
          slice('zzz', 'first', [B1, B2]),
          service('default', 'ssh', '172.30.0.52', '2025-01-01T00:00:00Z', 22),
          slice('default', 'ssh', [B1]),
        ].join('---\n'),
      );
      await writeFile(join(w.source, 'later.yaml'), later(30085));
      const d = await start(t, w, mode);
      const nodeIp = w.topo.nodeIp;
      // NodePort 22 is outside 30000-32767: the node's port 22 is not taken over; the Service's ClusterIP serves.
      const ssh = await probe(w.topo, { host: nodeIp, port: 22, count: 3, timeoutMs: 1000 });
      const sshClusterIP = await backendsAt(w, '172.30.0.52', 80);

      const load: Traffic = await startTraffic(w.topo, { host: LATER_IP, port: 80, held: 4, intervalMs: 100, timeoutMs: 3000, heldTimeoutMs: 5000 });
      t.teardown(() => load.stop().then(() => {}, () => {}));
      // aaa/later now claims zzz/first's NodePort: only its NodePort is left out.
      await writeFile(join(w.source, 'later.yaml'), later(30080));
      await until('30085 no longer served', async () => (await probe(w.topo, { host: nodeIp, port: 30085, count: 1, timeoutMs: 1000 })).results[0]?.ok !== true, 30_000);
      const laterBefore = await backendsAt(w, LATER_IP, 80);
      const nodePortBefore = await backendsAt(w, nodeIp, 30080);
      await d.stop();
      const again = await start(t, w, mode);
      await new Promise((r) => setTimeout(r, 2000));
      const s = await finish(t, `${mode}: NodePort clash, loser's ClusterIP, restart`, load);
      t.deepEqual(ssh.counts, {}, "no backend answers on the node's port 22");
      t.is(sshClusterIP, 'b1');
      t.is(laterBefore, 'b3', "the later Service's ClusterIP serves");
      t.is(nodePortBefore, 'b1,b2', 'the NodePort stays with the Service created first');
      t.is(s.failed, 0, JSON.stringify(s.errors));
      t.is(await backendsAt(w, nodeIp, 30080), 'b1,b2', 'and after a restart');
      t.is(await backendsAt(w, LATER_IP, 80), 'b3');
      t.is(again.lines(/default\/ssh: spec\.ports\[0\]\.nodePort: 22 is outside the NodePort range 30000-32767/).length, 1, again.logs());
      t.is(again.lines(/aaa\/later: spec\.ports\[0\]\.nodePort: NodePort 30080\/TCP is already used by Service zzz\/first/).length, 1, again.logs());
      await converged(t, w, mode);
    });
  }
}
