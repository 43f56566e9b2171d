/**
 * Another program committing nf_tables changes all the time, in iptables
 * mode: `iptables-nft-save` starts its dump again whenever the ruleset
 * changes, so a read-back of a 2,000-service nat table may never end while
 * a table is committed every 10 ms (src/modes/shared/read-back.ts). drover
 * runs inside the node namespace, as on a node, so the nf_tables generation
 * tells it of every foreign commit and its periodic check asks for full
 * syncs. With real TCP traffic through a ClusterIP, a one-endpoint change
 * must still reach the kernel within seconds: the read-back is bounded and
 * put off with backoff, and partial syncs go on. Once the commits stop, a
 * read-back finishes and the kernel holds what a fresh sync would write.
 * Every test builds its own namespaces and removes them, also on failure.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { assertConverged, CLUSTER_IP, finish, manifestWorld, reached, runFlags, startDrover, synced, traffic } from '../support/faults.ts';
import { until } from '../support/wait.ts';

const unavailable = await testbedUnavailableReason();

/** nft by its path: under npm, PATH starts with node_modules/.bin, which may hold an unrelated `nft`. */
const NFT = '/usr/sbin/nft';

/** Services beside web, each with one endpoint: enough rules that a dump takes longer than the gap between two commits. */
const BULK = 2000;

const service = `apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: nsd}\nspec: {clusterIP: ${CLUSTER_IP}, ports: [{name: http, port: 80, protocol: TCP}]}\n`;
const slice = (ips: readonly string[]) =>
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: nsd, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n${ips.map((ip) => `  - {addresses: [${ip}], conditions: {ready: true}}\n`).join('')}`;
const BEFORE = `${service}---\n${slice(['10.180.0.1', '10.180.0.2'])}`;
const AFTER = `${service}---\n${slice(['10.180.0.1', '10.180.0.2', '10.180.0.3'])}`;

/** {@link BULK} Services s0, s1, … in namespace bulk, on 172.30.10.1 onwards, each with the endpoint 10.180.0.1:8080. */
function bulk(): string {
  const docs: string[] = [];
  for (let i = 0; i < BULK; i++) {
    const ip = `172.30.${10 + Math.floor(i / 250)}.${(i % 250) + 1}`;
    docs.push(
      `apiVersion: v1\nkind: Service\nmetadata: {name: s${i}, namespace: bulk}\nspec: {clusterIP: ${ip}, ports: [{name: http, port: 80, protocol: TCP}]}\n`,
      `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s${i}-1, namespace: bulk, labels: {kubernetes.io/service-name: s${i}}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n  - {addresses: [10.180.0.1], conditions: {ready: true}}\n`,
    );
  }
  return docs.join('---\n');
}

if (unavailable) {
  test.skip(`read-back fault tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('another program committing an nf_tables table every 10 ms: a one-endpoint change still lands within seconds, and the read-back waits its turn', async (t) => {
    const w = await manifestWorld(t, BEFORE);
    await writeFile(join(w.source, 'bulk.yaml'), bulk());
    const flags = ['--source', w.source, '--state-dir', join(w.scratch, 'state'), '--iptables-backend', 'nft', '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16'];
    const d = startDrover([...flags, ...runFlags(w), '--sync-period', '2s'], { netns: w.topo.node });
    t.teardown(() => d.stop());
    await synced(d, 1, 180_000);
    t.is(await reached(w), 'b1,b2');
    const load = await traffic(t, w);

    // The other program: one nft process inside the node namespace, one commit per line, a line every 10 ms.
    const other = spawn('ip', ['netns', 'exec', w.topo.node, NFT, '-i'], { stdio: ['pipe', 'ignore', 'ignore'] });
    other.stdin.on('error', () => undefined);
    let commits = 0;
    const ticker = setInterval(() => other.stdin.write(commits++ % 2 === 0 ? 'add table ip churn\n' : 'delete table ip churn\n'), 10);
    const stopOther = async () => {
      clearInterval(ticker);
      if (other.exitCode !== null || other.signalCode !== null) return;
      const exited = new Promise((r) => other.once('exit', r));
      other.kill('SIGKILL');
      await exited;
    };
    t.teardown(stopOther);

    // The periodic check sees the other program's commits and asks for a full sync: its read-back cannot finish.
    await until('the check to ask for a full sync', async () => d.lines(/^the kernel may have changed behind drover: full sync$/).length > 0, 30_000);
    await writeFile(w.file, AFTER);
    const changed = Date.now();
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 20_000);
    const latency = Date.now() - changed;
    t.log(`the change reached the kernel ${latency} ms after it was made, with ${commits} commits by the other program so far`);
    t.true(d.lines(/^kernel read-back put off/).length > 0, 'a read-back was put off');

    // The other program stops: the next retry reads back, and the kernel holds what a fresh sync would write.
    await stopOther();
    const fulls = d.lines(/^full sync done$/).length;
    await until('a read-back to finish', async () => d.lines(/^full sync done$/).length > fulls, 90_000);
    const s = await finish(t, 'another program commits every 10 ms during a change', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    t.log(`read-backs put off: ${JSON.stringify(d.lines(/^kernel read-back put off/).map((l) => l.retryInMs))}`);
    await assertConverged(t, ['diff', ...flags, '--netns', w.topo.node]);
  });
}
