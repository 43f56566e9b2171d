/**
 * UDP through nftables mode with real datagrams, in throw-away network
 * namespaces (src/testbed): the pick rules are written over netlink without
 * nft's implied `meta l4proto tcp` (src/modes/nftables/pick-rule.ts), so a
 * new UDP flow to a ClusterIP, a NodePort and an externalTrafficPolicy
 * Local NodePort (map `local-endpoints`), IPv4 and IPv6, reaches each of
 * the two backends' UDP echo servers, and TCP still does. The kernel's
 * chains hold the count rules without that dependency and before
 * `external-local`'s final drop, also after a partial sync adds an endpoint
 * count; and a table whose pick rule an earlier drover wrote (TCP only,
 * UDP not DNATed) is mended by a full sync, which says so, and a client
 * that kept its source port through the window reaches a backend once the
 * entries not DNATed are deleted (conntrack/stale.ts notNATedUDPFlows).
 */
import test from 'ava';
import type { Frontends, NodeInfo, ServicePort, Snapshot } from '../../src/model/types.ts';
import { ipv4Frontends } from '../../src/model/types.ts';
import { DualStackNftablesBackend } from '../../src/modes/nftables/dual-stack.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { SystemConntrack } from '../../src/conntrack/exec.ts';
import { notNATedUDPFlows } from '../../src/conntrack/stale.ts';
import { probe, udpOnce } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { dualSnap, ep, sp } from '../support/snapshots.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
const UDP_PORT = 5353;
const NODE_IP = '192.168.100.1';
const NODE_IP6 = 'fd00:100::1';
const OUTSIDE = '192.168.100.2';
const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ip6: 'fd00:244:1::2', ports: [8080], udpPorts: [UDP_PORT] },
  { name: 'b2', ip: '10.244.1.3', ip6: 'fd00:244:1::3', ports: [8080], udpPorts: [UDP_PORT] },
];
const NODE: NodeInfo = { name: 'node1', addresses: [{ type: 'InternalIP', address: NODE_IP }, { type: 'InternalIP', address: NODE_IP6 }] };

/** Endpoints `names` of BACKENDS on port `port`, on this node, IPv4 or IPv6. */
const endpoints = (names: readonly string[], port: number, v6 = false) =>
  BACKENDS.filter((b) => names.includes(b.name)).map((b) => ep(v6 ? `[${b.ip6}]:${port}` : `${b.ip}:${port}`, { nodeName: NODE.name }));

/** The Services: UDP `dns` (ClusterIP, NodePort 30053), UDP `local` (externalTrafficPolicy Local, NodePort 30054), TCP `web`; `dns` in IPv6 too. */
function world(dnsBackends: readonly string[] = ['b1', 'b2'], localBackends: readonly string[] = ['b1', 'b2']): Snapshot {
  const dns = sp('default/dns:dns', '10.96.0.53', 53, endpoints(dnsBackends, UDP_PORT), { protocol: 'UDP', type: 'NodePort', frontends: { ...ipv4Frontends('10.96.0.53'), nodePort: 30053 } });
  const local = sp('default/local:dns', '10.96.0.54', 53, endpoints(localBackends, UDP_PORT), {
    protocol: 'UDP',
    type: 'NodePort',
    externalTrafficPolicy: 'Local',
    frontends: { ...ipv4Frontends('10.96.0.54'), nodePort: 30054 },
  });
  const web = sp('default/web:http', '10.96.0.80', 80, endpoints(['b1', 'b2'], 8080));
  const v6: Frontends = { clusterIPs: [{ family: 'IPv6', ip: 'fd00:96::53' }], externalIPs: [], loadBalancerIngress: [], loadBalancerSourceRanges: [] };
  const dns6: ServicePort = { ...sp('default/dns:dns', 'fd00:96::53', 53, endpoints(['b1', 'b2'], UDP_PORT, true), { protocol: 'UDP', frontends: v6 }) };
  return { ...dualSnap([dns, local, web], [dns6]), node: NODE };
}

if (unavailable) {
  test.skip(`nftables UDP kernel tests skipped: ${unavailable}`, () => {});
} else {
  let topo: Topology;
  let backend: DualStackNftablesBackend;
  /** A new client source port per datagram: each one a new UDP flow (a conntrack entry of its own). */
  let sourcePort = 40000;
  const node = (args: string[]) => topo.exec(topo.node, '/usr/sbin/nft', args);

  /**
   * The backends that answer UDP datagrams to `host:port` from the outside client, one new flow each, sent `perRound`
   * at a time until both backends answered or `rounds` ran out, or a round had a datagram without an answer (within
   * `timeoutMs`); with the client addresses the backends saw and the errors.
   */
  async function udpBackends(host: string, port: number, opts: { rounds?: number; perRound?: number; timeoutMs?: number } = {}): Promise<{ backends: string[]; clients: string[]; failed: string[] }> {
    const backends = new Set<string>();
    const clients = new Set<string>();
    const failed: string[] = [];
    for (let round = 0; round < (opts.rounds ?? 8) && backends.size < 2 && failed.length === 0; round++) {
      const sent = Array.from({ length: opts.perRound ?? 4 }, () => udpOnce(topo, { from: topo.client().netns, host, port, sourcePort: sourcePort++, timeoutMs: opts.timeoutMs ?? 10_000 }));
      for (const r of await Promise.all(sent)) {
        if (!r.ok) failed.push(r.code);
        else {
          backends.add(r.reply.backend);
          clients.add(r.reply.client);
        }
      }
    }
    return { backends: [...backends].sort(), clients: [...clients].sort(), failed };
  }

  /** Chain `chain` of `table` as the kernel has it: each rule's comment, and whether its bytecode compares l4proto to TCP (nft --debug=netlink). */
  async function chainRules(table: 'ip' | 'ip6', chain: string): Promise<{ comments: string[]; tcpOnly: boolean }> {
    const json = JSON.parse((await node(['-j', 'list', 'chain', table, 'drover', chain])).stdout) as { nftables: { rule?: { comment?: string } }[] };
    const debug = await node(['--debug=netlink', 'list', 'chain', table, 'drover', chain]);
    return {
      comments: json.nftables.flatMap((i) => (i.rule ? [i.rule.comment ?? ''] : [])),
      tcpOnly: /meta load l4proto => reg 1 \]\s*\[ cmp eq reg 1 0x00000006 \]/.test(debug.stdout + debug.stderr),
    };
  }

  /** The reply sources of the node's UDP conntrack entries from source port `sport` to the ClusterIP 10.96.0.53:53 (conntrack -L). */
  async function udpEntries(sport: number): Promise<string[]> {
    const res = await topo.exec(topo.node, 'conntrack', ['-L', '-p', 'udp', '--orig-dst', '10.96.0.53', '--orig-port-dst', '53', '--orig-port-src', String(sport)], { allowFail: true });
    return res.stdout
      .split('\n')
      .flatMap((l) => {
        const m = /src=\S+ dst=\S+ sport=\d+ dport=\d+ .*?src=(\S+) dst=/.exec(l);
        return m ? [m[1]!] : [];
      })
      .sort();
  }

  test.before(async () => {
    topo = await createTopology({ backends: BACKENDS, clients: [{ name: 'outside', ip: OUTSIDE, ip6: 'fd00:100::2' }] });
    backend = new DualStackNftablesBackend({
      IPv4: { nft: new SystemNft({ netns: topo.node }), render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, frontends: { nodePortIPs: [NODE_IP] } },
      IPv6: { nft: new SystemNft({ netns: topo.node, family: 'IPv6' }), render: { clusterCIDR: 'fd00:244::/48', masqueradeAll: false, family: 'IPv6' }, frontends: { nodePortIPs: [NODE_IP6], family: 'IPv6' } },
      logger: silentLogger(),
    });
    await backend.sync(world(), FULL);
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('new UDP flows to a ClusterIP and a NodePort reach both endpoints; TCP still does', async (t) => {
    const clusterIP = await udpBackends('10.96.0.53', 53);
    t.deepEqual([clusterIP.backends, clusterIP.failed], [['b1', 'b2'], []]);
    const nodePort = await udpBackends(NODE_IP, 30053);
    t.deepEqual([nodePort.backends, nodePort.failed], [['b1', 'b2'], []]);
    const tcp = await probe(topo, { from: topo.client().netns, host: '10.96.0.80', port: 80, count: 10 });
    t.deepEqual([Object.keys(tcp.counts).sort(), tcp.errors], [['b1', 'b2'], {}]);
  });

  test.serial('externalTrafficPolicy Local: new UDP flows get this node\'s endpoints from local-endpoints, the client address kept', async (t) => {
    const local = await udpBackends(NODE_IP, 30054);
    t.deepEqual(local, { backends: ['b1', 'b2'], clients: [OUTSIDE], failed: [] });
  });

  test.serial('IPv6: new UDP flows to the IPv6 ClusterIP reach both endpoints', async (t) => {
    const v6 = await udpBackends('fd00:96::53', 53);
    t.deepEqual([v6.backends, v6.failed], [['b1', 'b2'], []]);
  });

  test.serial('the kernel holds the count rules without the tcp dependency, the local one before external-local\'s drop', async (t) => {
    for (const table of ['ip', 'ip6'] as const) {
      const pick = await chainRules(table, 'pick');
      t.deepEqual(pick, { comments: ['the endpoint of a client with affinity', 'one of 2 endpoints, any protocol'], tcpOnly: false }, table);
    }
    const local = await chainRules('ip', 'external-local');
    t.false(local.tcpOnly);
    t.deepEqual(local.comments.slice(-2), ['one of 2 local endpoints, any protocol', 'no local endpoint']);
  });

  test.serial('a partial sync that adds an endpoint count writes its rule over netlink too, in its place', async (t) => {
    const changed = { full: false, changed: new Set(['default/dns:dns', 'default/local:dns']) };
    await backend.sync(world(['b2'], ['b1']), changed);
    const pick = await chainRules('ip', 'pick');
    t.deepEqual(pick, { comments: ['the endpoint of a client with affinity', 'one of 1 endpoint, any protocol', 'one of 2 endpoints, any protocol'], tcpOnly: false });
    const local = await chainRules('ip', 'external-local');
    t.false(local.tcpOnly);
    t.deepEqual(local.comments.slice(-3), ['one of 1 local endpoint, any protocol', 'one of 2 local endpoints, any protocol', 'no local endpoint']);
    t.deepEqual(await udpBackends('10.96.0.53', 53, { rounds: 1 }), { backends: ['b2'], clients: [topo.gateway], failed: [] }, 'masqueraded to the node');
    t.deepEqual(await udpBackends(NODE_IP, 30054, { rounds: 1 }), { backends: ['b1'], clients: [OUTSIDE], failed: [] });
    await backend.sync(world(), FULL);
  });

  test.serial('a pick rule an earlier drover wrote (TCP only: UDP not DNATed) is replaced by the next full sync', async (t) => {
    // The rule as drover wrote it before: nft text, whose map key nft compiles with `meta l4proto tcp`.
    const old = 'ip daddr . meta l4proto . th dport @endpoint-count-2 dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @endpoints comment "one of 2 endpoints"';
    await topo.exec(topo.node, '/usr/sbin/nft', ['-f', '-'], {
      input: `flush chain ip drover pick\nadd rule ip drover pick dnat ip to ip saddr . ip daddr . meta l4proto . th dport map @affinity comment "the endpoint of a client with affinity"\nadd rule ip drover pick ${old}\n`,
    });
    t.deepEqual(await chainRules('ip', 'pick'), { comments: ['the endpoint of a client with affinity', 'one of 2 endpoints'], tcpOnly: true });
    const broken = await udpBackends('10.96.0.53', 53, { rounds: 1, perRound: 2, timeoutMs: 1500 });
    t.deepEqual([broken.backends, broken.failed.length], [[], 2], 'the old rule does not DNAT UDP');
    // A client that keeps its source port (statsd, syslog): its first datagram gets an entry without NAT.
    const fixed = { from: topo.client().netns, host: '10.96.0.53', port: 53, sourcePort: 45053 };
    const lost = await udpOnce(topo, { ...fixed, timeoutMs: 1500 });
    t.false(lost.ok, 'not answered');
    t.deepEqual(await udpEntries(45053), ['10.96.0.53'], 'its entry exists, replied from the ClusterIP itself: not DNATed');
    const tcp = await probe(topo, { from: topo.client().netns, host: '10.96.0.80', port: 80, count: 3 });
    t.deepEqual(tcp.errors, {}, 'TCP it does');
    const r = await backend.sync(world(), FULL);
    t.true(r.written.chain! >= 1);
    t.deepEqual(await chainRules('ip', 'pick'), { comments: ['the endpoint of a client with affinity', 'one of 2 endpoints, any protocol'], tcpOnly: false });
    t.deepEqual([r.udpNotNATed, r.families?.IPv4?.udpNotNATed], [true, true], 'the sync says its write replaced pick rules');
    // As the proxier does after such a sync (proxier.ts cleanNotNATed).
    const conntrack = new SystemConntrack(topo.node);
    const families = (['IPv4', 'IPv6'] as const).filter((f) => r.families?.[f]?.udpNotNATed);
    let deleted = 0;
    for (const flow of notNATedUDPFlows(world(), families)) deleted += await conntrack.deleteUDP(flow);
    t.true(deleted >= 1, `${deleted} entries not DNATed deleted`);
    const kept = await udpOnce(topo, { ...fixed, timeoutMs: 3000 });
    t.true(kept.ok && ['b1', 'b2'].includes(kept.reply.backend), `the same flow reaches a backend now: ${JSON.stringify(kept)}`);
    t.notDeepEqual(await udpEntries(45053), ['10.96.0.53'], 'its entry is DNATed');
    t.deepEqual((await udpBackends('10.96.0.53', 53)).backends, ['b1', 'b2']);
    const again = await backend.sync(world(), FULL);
    t.deepEqual([again.written, again.transactions], [{ 'set entry': 0, set: 0, chain: 0 }, 0], 'then a full sync finds nothing to write');
  });
}
