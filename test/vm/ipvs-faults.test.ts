/**
 * Surviving faults in IPVS mode (the test guest): while `drover run --mode
 * ipvs` serves a Service from a manifest folder, a real server is deleted
 * by hand, and real TCP traffic runs through the ClusterIP from a client
 * namespace the whole time (test/support/faults.ts: long-lived connections
 * and new ones, counted as attempted, failed and lost). The periodic drift
 * check must notice and repair it by itself (and, before the fault, find
 * nothing to repair after drover's own sync); afterwards the kernel holds
 * what a fresh sync would write (`drover diff` exits 0 with "no
 * differences") and new connections reach every endpoint again.
 *
 * The deleted real server is one that carries no long-lived connection:
 * with `net.ipv4.vs.expire_nodest_conn=1`, which drover sets as kube-proxy
 * does, the kernel drops the connections of a real server that is gone, so
 * those held to it would break whatever the proxy does. Connections to
 * every other real server must all survive.
 */
import test from 'ava';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/testbed/exec.ts';
import { CLUSTER_IP, drover, faultLine, faultWorld, reached, runFlags, startDrover, synced, traffic } from '../support/faults.ts';
import { ipvsadmState, registerIpvsTests, until } from './support/env.ts';

const BACKENDS = ['10.180.0.1', '10.180.0.2', '10.180.0.3'];
const MANIFESTS =
  `apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: nsd}\nspec: {clusterIP: ${CLUSTER_IP}, ports: [{name: http, port: 80, protocol: TCP}]}\n---\n` +
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: nsd, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\n` +
  `ports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n${BACKENDS.map((ip) => `  - {addresses: [${ip}], conditions: {ready: true}}\n`).join('')}`;
/** The guest is emulated: a start of drover and its first full sync take minutes there. */
const START_MS = 300_000;

/**
 * Real servers of the ClusterIP that carry the `held` long-lived connections:
 * `ipvsadm -Lnc` is read every second, keeping only the connections
 * ESTABLISHED in every read so far, until no more than `held` are left. A
 * new connection of the traffic can stay ESTABLISHED for seconds under
 * emulation, so two reads a fixed time apart may still both show one.
 * @throws Error when more than `held` are left after `timeoutMs`
 */
async function heldRealServers(netns: string, held: number, timeoutMs = 120_000): Promise<Set<string>> {
  const read = async () => {
    const out = (await run('ipvsadm', ['-Lnc'], { netns })).stdout;
    return new Set(
      out
        .split('\n')
        .map((l) => l.trim().split(/\s+/))
        .filter((w) => w[0] === 'TCP' && w[2] === 'ESTABLISHED' && w[4] === `${CLUSTER_IP}:80`)
        .map((w) => `${w[3]} ${w[5]}`),
    );
  };
  let still = await read();
  await until(`no more than ${held} connections ESTABLISHED in every read`, async () => {
    await new Promise((r) => setTimeout(r, 1000));
    const now = await read();
    still = new Set([...still].filter((c) => now.has(c)));
    return still.size <= held;
  }, timeoutMs, 0);
  return new Set([...still].map((c) => c.split(' ')[1]!.replace(/:8080$/, '')));
}

if (await registerIpvsTests('IPVS fault tests')) {
  test.serial('a real server deleted by hand: the drift check repairs it; no long-lived connection is lost', async (t) => {
    const w = await faultWorld(t, { readyTimeoutMs: 120_000 });
    const source = join(w.scratch, 'manifests');
    await mkdir(source);
    await writeFile(join(source, 'web.yaml'), MANIFESTS);
    const flags = ['--mode', 'ipvs', '--source', source, '--state-dir', join(w.scratch, 'state'), '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16'];
    // IPVS is programmed over netlink in drover's own namespace: drover runs inside the node namespace.
    const d = startDrover([...flags, ...runFlags(w), '--sync-period', '2s'], { netns: w.topo.node });
    t.teardown(() => d.stop());
    await synced(d, 1, START_MS).catch((e: Error) => {
      throw new Error(`${e.message}; drover run said:\n${d.logs().slice(-4000)}`);
    });
    const servers = BACKENDS.map((ip) => `-> ${ip}:8080 Masq 1`);
    t.deepEqual(await ipvsadmState(w.topo.node), [`TCP ${CLUSTER_IP}:80 rr`, ...servers]);

    // The periodic drift check on the real kernel finds nothing after drover's own sync: no second full sync.
    // Each sync, the periodic checks too, rewrites the status file.
    const lastSyncAt = async () => {
      try {
        return (JSON.parse(await readFile(join(w.scratch, 'status.json'), 'utf8')) as { lastSync?: { at: string } }).lastSync?.at;
      } catch {
        return undefined; // not written yet, or caught mid-write
      }
    };
    let afterFirst: string | undefined;
    await until('the status file of the first sync', async () => (afterFirst = await lastSyncAt()) !== undefined, 60_000, 250);
    await until('a periodic drift check', async () => ![undefined, afterFirst].includes(await lastSyncAt()), 120_000, 250);
    t.is(d.lines(/^full sync done/).length, 1, `no drift, so no full sync after the first:\n${d.logs().slice(-3000)}`);
    t.deepEqual(d.lines(/the kernel may have changed behind drover/), []);

    // Two long-lived connections over three real servers: at least one carries none.
    const load = await traffic(t, w, { held: 2, timeoutMs: 5000, heldTimeoutMs: 10_000 });
    const held = await heldRealServers(w.topo.node, 2);
    t.true(held.size >= 1, 'the long-lived connections are seen in the kernel');
    const victim = BACKENDS.find((ip) => !held.has(ip))!;
    const fullBefore = d.lines(/^full sync done/).length;
    await run('ipvsadm', ['-d', '-t', `${CLUSTER_IP}:80`, '-r', `${victim}:8080`], { netns: w.topo.node });
    const broken = Date.now();
    await until('the drift check to repair the real server', async () => (await ipvsadmState(w.topo.node)).includes(`-> ${victim}:8080 Masq 1`), 120_000, 250);
    t.log(`repaired ${Date.now() - broken} ms after ${victim}:8080 was deleted (drift check every 2 s)`);
    // The kernel shows the repair before drover logs the sync that made it.
    await until('the repair logged as a full sync', async () => d.lines(/^full sync done/).length > fullBefore, 60_000, 250);
    t.true(JSON.stringify(d.lines(/the kernel may have changed behind drover/)).includes(`real servers of TCP/${CLUSTER_IP}:80 are gone from the kernel`));
    await until('every endpoint served', async () => (await reached(w)) === 'b1,b2,b3', 60_000, 1000);

    const s = await load.stop();
    t.log(faultLine('IPVS real server deleted by hand', s));
    t.true(s.attempted > 0 && s.heldRequests > 0, 'traffic ran');
    t.is(s.lost, 0, `long-lived connections lost: ${JSON.stringify(s.lostErrors)} on ${JSON.stringify(s.lostBackends)}`);
    // The victim carried none of the long-lived connections (checked from the traffic's own count).
    const victimName = `b${BACKENDS.indexOf(victim) + 1}`;
    t.false(victimName in s.heldBackends, `a long-lived connection was on ${victimName}: ${JSON.stringify(s.heldBackends)}`);
    // A new connection to the victim in flight at the very moment of the deletion breaks with it (expire_nodest_conn): at most one.
    t.true(s.failed <= 1, JSON.stringify(s.errors));
    t.deepEqual(await ipvsadmState(w.topo.node), [`TCP ${CLUSTER_IP}:80 rr`, ...servers]);
    const diff = await drover(['diff', ...flags], { netns: w.topo.node });
    t.deepEqual([diff.code, diff.stdout], [0, 'no differences\n'], diff.stderr);
  });
}
