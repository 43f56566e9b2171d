/**
 * IPVS mode on the guest's kernel, IPv4: ClientIP session affinity
 * (persistence) through a ClusterIP and a NodePort, and a UDP client that
 * keeps its source port reaching the new endpoint after a change, at a
 * ClusterIP and at a NodePort. The driver syncs through the real Proxier
 * (`open({ conntrack: true })`), so stale UDP conntrack entries are deleted
 * as `drover run` deletes them.
 *
 * IPVS keeps a persistence template per virtual server while connections it
 * controls live, and a closed TCP connection stays in IPVS's TIME_WAIT for
 * 2 minutes (a fixed timeout), so "after the timeout the client may move"
 * is shown with UDP, whose IPVS connection timeout that test sets in the
 * node's namespace (`ipvsadm --set 0 0 N`; ipvsadm(8)) to 1 s, below the
 * affinity timeout (5 s): each new connection renews the template, so the
 * template alone keeps the client on its endpoint, and once the client is
 * quiet its connections are gone before the template's own timer fires. A
 * template whose timer fires while it still controls connections is kept
 * another 60 s (ip_vs_conn_expire), which a UDP timeout above the affinity
 * timeout made this test wait. The test sets the timeout back to 300 s,
 * the default: the UDP change tests need IPVS's own connection entry not
 * to expire before the change.
 * The datagrams a check needs go out from one helper process (udpEach),
 * milliseconds apart: each helper is a Node start.
 */
import test from 'ava';
import { probe, udpEach, udpOnce } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import { ipv4Frontends, type NodeInfo, type ServicePort } from '../../src/model/types.ts';
import { ep, sp } from '../support/snapshots.ts';
import { Driver } from './support/driver-client.ts';
import { createIpvsTopology, PROBE_TIMEOUT_MS, registerIpvsTests, until } from './support/env.ts';

const UDP_PORT = 5353;
const BACKENDS = ['b1', 'b2', 'b3'].map((name, i) => ({ name, ip: `10.244.1.${i + 2}`, ports: [8080], udpPorts: [UDP_PORT] }));
const NODE: NodeInfo = { name: 'node1', addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] };
const all = (port: number) => BACKENDS.map((b) => ep(`${b.ip}:${port}`, { nodeName: 'node1' }));

/** TCP with ClientIP affinity (2 s), on a ClusterIP and a NodePort. */
const sticky = sp('default/sticky:http', '10.96.0.14', 80, all(8080), { type: 'NodePort', sessionAffinity: { timeoutSeconds: 2 }, frontends: ipv4Frontends('10.96.0.14', 30084) });
/** UDP with ClientIP affinity (5 s). */
const stickyUdp = sp('default/sticky-dns:dns', '10.96.0.54', 53, all(UDP_PORT), { protocol: 'UDP', sessionAffinity: { timeoutSeconds: 5 } });
/** UDP on a ClusterIP and a NodePort, with one endpoint, `backend`. */
const dns = (backend: string) => sp('default/dns:dns', '10.96.0.53', 53, [ep(`${backend}:${UDP_PORT}`, { nodeName: 'node1' })], { protocol: 'UDP', type: 'NodePort', frontends: ipv4Frontends('10.96.0.53', 30053) });
const services = (dnsBackend: string): ServicePort[] => [sticky, stickyUdp, dns(dnsBackend)];

let topo: Topology;
let driver: Driver;

if (await registerIpvsTests('IPVS affinity and UDP tests')) {
  test.before(async () => {
    topo = await createIpvsTopology(BACKENDS);
    driver = await Driver.start(topo.node);
    await driver.open({ readNodeAddresses: true, conntrack: true });
    await driver.sync(services('10.244.1.2'), { full: true }, NODE);
  });

  test.after.always(async () => {
    await driver?.stop();
    await topo?.destroy();
  });

  test.serial('ClientIP affinity: a client keeps its endpoint through the NodePort and through the ClusterIP, persistence with the affinity timeout', async (t) => {
    const from = topo.client('outside').netns;
    for (const [host, port] of [[topo.nodeIp, 30084], ['10.96.0.14', 80]] as const) {
      const s = await probe(topo, { from, host, port, count: 15, timeoutMs: PROBE_TIMEOUT_MS });
      t.log(`${host}:${port}`, JSON.stringify(s.counts));
      t.deepEqual(s.errors, {}, `${host}:${port}`);
      t.is(Object.keys(s.counts).length, 1, `${host}:${port}: one endpoint for one client`);
    }
    const state = (await topo.exec(topo.node, 'ipvsadm', ['-S', '-n'])).stdout;
    t.regex(state, /^-A -t 10\.96\.0\.14:80 -s rr -p 2$/m, 'persistence with the affinity timeout');
    t.regex(state, new RegExp(`^-A -t ${topo.nodeIp.replace(/\./g, '\\.')}:30084 -s rr -p 2$`, 'm'));
  });

  test.serial('ClientIP affinity over UDP: datagrams from new source ports keep the endpoint; after the timeout the client may move', async (t) => {
    const from = topo.client('outside').netns;
    /** The backend that answered a datagram from each of `sourcePorts`, all sent from one helper process. */
    const backendsOf = async (sourcePorts: number[]): Promise<string[]> => {
      const results = await udpEach(topo, { from, host: '10.96.0.54', port: 53, sourcePorts, timeoutMs: PROBE_TIMEOUT_MS });
      for (const r of results) t.true(r.ok, JSON.stringify(r));
      return results.map((r) => (r as { reply?: { backend?: string } }).reply?.backend ?? '?');
    };
    // IPVS's UDP connection timeout, 300 s by default: 1 s, below the affinity timeout (0 leaves the TCP ones as they are).
    await topo.exec(topo.node, 'ipvsadm', ['--set', '0', '0', '1']);
    t.teardown(() => topo.exec(topo.node, 'ipvsadm', ['--set', '0', '0', '300']).then(() => undefined));
    let at = Date.now();
    const since = () => `${((Date.now() - at) / 1000).toFixed(1)} s`;
    const [first = '?', ...rest] = await backendsOf([41000, 41001, 41002, 41003, 41004]);
    t.log(`5 datagrams, all to ${first}, in ${since()}`);
    rest.forEach((b, i) => t.is(b, first, `source port ${41001 + i}: the same endpoint`));
    t.regex((await topo.exec(topo.node, 'ipvsadm', ['-S', '-n'])).stdout, /^-A -u 10\.96\.0\.54:53 -s rr -p 5$/m, 'persistence with the affinity timeout');
    // IPVS's entries of the virtual server: the client's connections and its persistence template.
    const entries = async () => (await topo.exec(topo.node, 'ipvsadm', ['-Lnc'])).stdout.split('\n').filter((l) => l.includes(' 10.96.0.54:53 '));
    // Rounds each after the template has expired; 8 rounds on one of 3 endpoints has odds 1 in 2187.
    const seen = new Set([first]);
    for (let round = 0; round < 8 && seen.size < 2; round++) {
      at = Date.now();
      await until('the UDP connections and the persistence template to expire', async () => (await entries()).length === 0, 120_000, 1000);
      t.log(`round ${round}: the entries expired in ${since()}`);
      at = Date.now();
      const [now = '?'] = await backendsOf([41100 + round]);
      t.log(`round ${round}: a datagram reached ${now} in ${since()}`);
      seen.add(now);
    }
    t.true(seen.size >= 2, `after the timeout the client moved: ${[...seen].join(', ')}`);
  });

  for (const [what, host, port, sourcePort] of [
    ['ClusterIP', '10.96.0.53', 53, 42053],
    ['NodePort', '192.168.100.1', 30053, 43053],
  ] as const) {
    test.serial(`UDP at the ${what}: a client that keeps its source port reaches the new endpoint after a change (its stale conntrack entry deleted)`, async (t) => {
      const to = { from: topo.client('outside').netns, host, port, timeoutMs: PROBE_TIMEOUT_MS };
      await driver.sync(services('10.244.1.2'), { full: false, changed: ['default/dns:dns'] }, NODE);
      for (const r of await udpEach(topo, { ...to, sourcePorts: [sourcePort, sourcePort] })) t.like(r, { ok: true, reply: { backend: 'b1' } });
      const entries = async () => (await topo.exec(topo.node, 'conntrack', ['-L', '-p', 'udp', '--orig-port-src', String(sourcePort)], { allowFail: true })).stdout.trim();
      t.regex(await entries(), /src=10\.244\.1\.2 /, 'the flow is NATed to b1');
      await driver.sync(services('10.244.1.3'), { full: false, changed: ['default/dns:dns'] }, NODE);
      const left = await entries();
      t.log('after the change:', left);
      t.notRegex(left, /src=10\.244\.1\.2 /, 'no entry to b1 is left');
      const after = await udpOnce(topo, { ...to, sourcePort });
      t.like(after, { ok: true, reply: { backend: 'b2' } }, JSON.stringify(after));
    });
  }
}
