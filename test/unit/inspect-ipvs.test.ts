/**
 * The inspect commands in IPVS mode on in-memory fakes (FakeIpvs, FakeIpset,
 * FakeLinks, FakeIptables), programmed by a real IpvsBackend sync and then
 * changed by hand: exact text of chains, trace, diff and status.
 */
import test from 'ava';
import { loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { desiredIpvsState } from '../../src/modes/ipvs/assemble.ts';
import { ipvsStaticRules } from '../../src/modes/ipvs/rules.ts';
import { selectServicePorts, UnknownServiceError } from '../../src/modes/shared/kube-chains/chains.ts';
import { formatIpvsChains, ipvsServicePortViews } from '../../src/modes/ipvs/chains.ts';
import { formatIpvsDrift, ipvsDrift, ipvsDriftCount } from '../../src/modes/ipvs/diff.ts';
import { ipvsStatusLines } from '../../src/modes/ipvs/operations.ts';
import { ipvsCounts, readIpvsLive, unsupportedNote, type IpvsLive } from '../../src/modes/ipvs/live.ts';
import { ipvsSchedule } from '../../src/modes/ipvs/schedule.ts';
import { formatStatus, type StatusRecord } from '../../src/inspect/status.ts';
import { ipvsTraceContext, ipvsTraceFormat } from '../../src/modes/ipvs/trace.ts';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { trace, type Packet } from '../../src/inspect/trace.ts';
import { ipv4Frontends, type Snapshot } from '../../src/model/types.ts';
import { dns, empty, RENDER, web, World } from '../support/ipvs-world.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const sticky = sp('default/sticky:https', '10.96.0.20', 443, [ep('10.244.3.2:8443')], { sessionAffinity: { timeoutSeconds: 600 } });
const state = (): Snapshot => snap(web('10.244.1.2', '10.244.1.3'), dns('10.244.2.2'), empty, sticky);
const desired = () => desiredIpvsState(state(), { scheduler: 'rr' });
const DRIFT_OPTS = { serviceCIDR: '10.96.0.0/12', rules: { statics: ipvsStaticRules(RENDER), iptablesStatics: loadStaticRules() } };
const WEB = { protocol: 'TCP', address: '10.96.0.10', port: 80 } as const;
const NODE = '192.168.100.1';

/** A node after a real IPVS sync of `state()`. */
async function synced(): Promise<World> {
  const w = new World();
  await w.backend().sync(state(), { full: true, changed: new Set() });
  return w;
}

/** The synced node, then changed by hand: counters, a quiesced real server, a foreign virtual server, a lost set entry and address. */
async function touched(): Promise<{ w: World; live: IpvsLive }> {
  const w = await synced();
  w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.2:8080', 2, 5);
  await w.ipvs.setDest(WEB, { address: '10.244.1.3', port: 8080, weight: 0, forwarding: 'masq' });
  w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.3:8080', 1, 0);
  await w.ipvs.newService({ protocol: 'TCP', address: '192.168.77.1', port: 80, scheduler: 'wrr' });
  await w.ipset.restore('del KUBE-LOOP-BACK 10.244.2.2,udp:53,10.244.2.2\n');
  await w.links.delAddress((await w.links.find('kube-ipvs0'))!, { address: '10.96.0.53', prefixLength: 32 });
  return { w, live: await readIpvsLive(w, { tables: true }) };
}

test('chains --mode ipvs with --source: each virtual server under its service port, with real servers, counters, kube-ipvs0 and ipset entries', async (t) => {
  const { live } = await touched();
  t.is(
    formatIpvsChains(ipvsServicePortViews(live, desired().virtualServers), true),
    `# default/empty:http (virtual server TCP 10.96.0.11:80)
TCP 10.96.0.11:80 rr (flags: hashed)
  kube-ipvs0: 10.96.0.11/32 bound
  KUBE-CLUSTER-IP: 10.96.0.11,tcp:80
  no real servers: IPVS refuses connections to it

# default/sticky:https (virtual server TCP 10.96.0.20:443)
TCP 10.96.0.20:443 rr persistent 600 s, netmask 255.255.255.255 (flags: persistent, hashed)
  kube-ipvs0: 10.96.0.20/32 bound
  KUBE-CLUSTER-IP: 10.96.0.20,tcp:443
  -> real server      forward  weight  active  inactive  KUBE-LOOP-BACK
  -> 10.244.3.2:8443  Masq     1       0       0         10.244.3.2,tcp:8443,10.244.3.2

# default/web:http (virtual server TCP 10.96.0.10:80)
TCP 10.96.0.10:80 rr (flags: hashed)
  kube-ipvs0: 10.96.0.10/32 bound
  KUBE-CLUSTER-IP: 10.96.0.10,tcp:80
  -> real server      forward  weight  active  inactive  KUBE-LOOP-BACK
  -> 10.244.1.2:8080  Masq     1       2       5         10.244.1.2,tcp:8080,10.244.1.2
  -> 10.244.1.3:8080  Masq     0       1       0         10.244.1.3,tcp:8080,10.244.1.3

# kube-system/dns:dns (virtual server UDP 10.96.0.53:53)
UDP 10.96.0.53:53 rr (flags: hashed)
  kube-ipvs0: 10.96.0.53/32 not bound
  KUBE-CLUSTER-IP: 10.96.0.53,udp:53
  -> real server    forward  weight  active  inactive  KUBE-LOOP-BACK
  -> 10.244.2.2:53  Masq     1       0       0         10.244.2.2,udp:53,10.244.2.2 (missing)

# TCP 192.168.77.1:80 (not in --source)
TCP 192.168.77.1:80 wrr (flags: hashed)
  kube-ipvs0: 192.168.77.1/32 not bound
  KUBE-CLUSTER-IP: 192.168.77.1,tcp:80 (missing)
  no real servers: IPVS refuses connections to it
`,
  );
});

test('chains --mode ipvs without --source lists virtual servers by address, and says so', async (t) => {
  const w = new World();
  await w.backend().sync(snap(web('10.244.1.2'), empty), { full: true, changed: new Set() });
  t.is(
    formatIpvsChains(ipvsServicePortViews(await readIpvsLive(w)), false),
    `(no --source: IPVS keeps no service names, so virtual servers are listed by address)

# TCP 10.96.0.10:80
TCP 10.96.0.10:80 rr (flags: hashed)
  kube-ipvs0: 10.96.0.10/32 bound
  KUBE-CLUSTER-IP: 10.96.0.10,tcp:80
  -> real server      forward  weight  active  inactive  KUBE-LOOP-BACK
  -> 10.244.1.2:8080  Masq     1       0       0         10.244.1.2,tcp:8080,10.244.1.2

# TCP 10.96.0.11:80
TCP 10.96.0.11:80 rr (flags: hashed)
  kube-ipvs0: 10.96.0.11/32 bound
  KUBE-CLUSTER-IP: 10.96.0.11,tcp:80
  no real servers: IPVS refuses connections to it
`,
  );
  t.is(formatIpvsChains([], false), '(no --source: IPVS keeps no service names, so virtual servers are listed by address)\n\nno IPVS virtual servers in the kernel\n');
});

test('chains --mode ipvs: a service port the kernel lacks, selection by name, and the JSON shape', async (t) => {
  const w = new World();
  const live = await readIpvsLive(w);
  const views = ipvsServicePortViews(live, desired().virtualServers);
  t.is(
    formatIpvsChains(selectServicePorts(views, 'default/empty', 'in --source'), true),
    `# default/empty:http: no virtual server TCP 10.96.0.11:80 in the kernel
  kube-ipvs0: 10.96.0.11/32 not bound
  KUBE-CLUSTER-IP: 10.96.0.11,tcp:80 (missing)
`,
  );
  t.throws(() => selectServicePorts(views, 'default/nope', 'in --source'), { instanceOf: UnknownServiceError, message: 'no rules for service default/nope in --source' });

  const { live: touchedLive } = await touched();
  const dnsView = ipvsServicePortViews(touchedLive, desired().virtualServers).find((v) => v.servicePort === 'kube-system/dns:dns');
  t.deepEqual(dnsView, {
    servicePort: 'kube-system/dns:dns',
    key: 'UDP/10.96.0.53:53',
    virtualServer: { protocol: 'UDP', address: '10.96.0.53', port: 53, scheduler: 'rr', persistentTimeoutSeconds: null, netmask: '255.255.255.255', flags: ['hashed'] },
    bound: false,
    clusterIP: { set: 'KUBE-CLUSTER-IP', entry: '10.96.0.53,udp:53', present: true },
    realServers: [
      {
        address: '10.244.2.2',
        port: 53,
        weight: 1,
        forwarding: 'masq',
        activeConns: 0,
        inactiveConns: 0,
        loopBack: { set: 'KUBE-LOOP-BACK', entry: '10.244.2.2,udp:53,10.244.2.2', present: false },
      },
    ],
  });
});

const pkt = (src: string, dst: string, dport: number, proto: Packet['proto'] = 'tcp'): Packet => ({ src, dst, dport, proto });
const ctxOf = (live: IpvsLive, sets = live.sets) => ipvsTraceContext({ ...live, sets }, new Set([NODE, ...(live.bound ?? []).map((a) => a.address)]));
const summary = (r: ReturnType<typeof trace>) => r.outcomes.map((o) => ({ p: Number(o.probability.toFixed(6)), verdict: o.verdict, masq: o.masqueraded }));

test('trace --mode ipvs from outside the cluster CIDR: the ipset marks it, IPVS splits round robin, POSTROUTING masquerades', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  t.is(
    formatTrace(trace(ctxOf(live), pkt('192.168.100.2', '10.96.0.10', 80)), ipvsTraceFormat),
    `trace 192.168.100.2 -> 10.96.0.10:80/tcp, a new connection from outside the node: nat PREROUTING

nat PREROUTING
  line 12   -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
nat KUBE-SERVICES
  line 28   -A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
nat KUBE-MARK-MASQ
  line 17   -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
nat KUBE-SERVICES
  line 34   -A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
filter INPUT
  line 13   -A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
filter KUBE-IPVS-FILTER
  line 23   -A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
filter INPUT
  line 14   -A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
  line 15   -A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT

then one of 2 branches:
  (50.00%) DNAT to 10.244.1.2:8080, masqueraded
    ipvs TCP 10.96.0.10:80 rr
      -> 10.244.1.2:8080 Masq weight 1   [taken with probability 0.5000]
  (50.00%) DNAT to 10.244.1.3:8080, masqueraded
    ipvs TCP 10.96.0.10:80 rr
      -> 10.244.1.3:8080 Masq weight 1   [taken with probability 0.5000]

then, in every branch:
filter OUTPUT
  line 18   -A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
nat POSTROUTING
  line 14   -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
nat KUBE-POSTROUTING
  line 26   -A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
  line 27   -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully

real servers (probability for a new connection):
  10.244.1.2:8080         50.00%  masqueraded
  10.244.1.3:8080         50.00%  masqueraded
verdict: IPVS to one of 2 real servers, masqueraded
`,
  );
});

test('trace --mode ipvs: hairpin through KUBE-LOOP-BACK, from the node itself, quiesced and persistent servers', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  t.deepEqual(summary(trace(ctxOf(live), pkt('10.244.1.2', '10.96.0.10', 80))), [
    { p: 0.5, verdict: { kind: 'dnat', ip: '10.244.1.2', port: 8080 }, masq: true },
    { p: 0.5, verdict: { kind: 'dnat', ip: '10.244.1.3', port: 8080 }, masq: false },
  ]);
  const fromNode = trace(ctxOf(live), pkt(NODE, '10.96.0.53', 53, 'udp'));
  t.is(fromNode.origin, 'node');
  t.deepEqual(summary(fromNode), [{ p: 1, verdict: { kind: 'dnat', ip: '10.244.2.2', port: 53 }, masq: true }]);
  t.deepEqual(
    fromNode.outcomes[0]!.steps.map((s) => `${s.table} ${s.chain} ${s.line || s.rule}`),
    ['nat OUTPUT 13', 'nat KUBE-SERVICES 28', 'nat KUBE-MARK-MASQ 17', 'nat KUBE-SERVICES 34', 'ipvs UDP 10.96.0.53:53 rr -> 10.244.2.2:53 Masq weight 1', 'filter OUTPUT 18', 'nat POSTROUTING 14', 'nat KUBE-POSTROUTING 26', 'nat KUBE-POSTROUTING 27'],
  );

  const { live: touchedLive } = await touched();
  const quiesced = trace(ctxOf(touchedLive), pkt('10.244.9.2', '10.96.0.10', 80));
  t.deepEqual(summary(quiesced), [{ p: 1, verdict: { kind: 'dnat', ip: '10.244.1.2', port: 8080 }, masq: false }]);
  t.deepEqual(quiesced.outcomes[0]!.notes, ['real server 10.244.1.3:8080 has weight 0 (quiesced): no new connections']);
  t.deepEqual(trace(ctxOf(touchedLive), pkt('192.168.100.2', '10.96.0.20', 443)).outcomes[0]!.notes, [
    'virtual server TCP 10.96.0.20:443 rr is persistent (600 s): assumed no persistence template for this client yet (a returning client goes to the real server it used before)',
  ]);
});

test('trace --mode ipvs: refused, no virtual server, not bound, and what it cannot evaluate', async (t) => {
  const { live } = await touched();
  const refused = trace(ctxOf(live), pkt('10.244.9.2', '10.96.0.11', 80));
  t.true(formatTrace(refused, ipvsTraceFormat).endsWith('\nverdict: refused by IPVS virtual server TCP 10.96.0.11:80 rr: it has no real server: IPVS refuses the connection (ICMP port unreachable)\n'));
  const none = trace(ctxOf(live), pkt('10.244.9.2', '10.96.0.99', 80));
  t.deepEqual(summary(none), [{ p: 1, verdict: { kind: 'untouched' }, masq: false }]);
  t.deepEqual(none.outcomes[0]!.notes, ['no IPVS virtual server for TCP 10.96.0.99:80']);
  const foreign = trace(ctxOf(live), pkt('192.168.100.2', '192.168.77.1', 80));
  t.deepEqual(foreign.outcomes[0]!.notes, [
    "192.168.77.1 is not one of the node's addresses (not bound on kube-ipvs0), so IPVS does not see this packet from outside the node",
  ]);
  // Without the ipsets' contents, the set match is reported, not guessed.
  t.deepEqual(summary(trace(ctxOf(live, new Map()), pkt('192.168.100.2', '10.96.0.10', 80))), [
    { p: 1, verdict: { kind: 'unknown', table: 'nat', chain: 'KUBE-SERVICES', line: 28, reason: 'cannot evaluate -m set --match-set KUBE-CLUSTER-IP (ipset contents are not traced)' }, masq: false },
  ]);
});

test('IPVS scheduling: rr and wrr shares, weight 0, and schedulers that decide by state the read-back does not show', (t) => {
  const d = (address: string, weight: number, upperThreshold = 0) => ({
    address, port: 80, weight, forwarding: 'masq' as const, upperThreshold, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, persistConns: 0,
  });
  const shares = (s: ReturnType<typeof ipvsSchedule>) => (s.kind === 'split' ? s.branches.map((b) => [b.dest.address, b.probability]) : s);
  t.deepEqual(shares(ipvsSchedule({ scheduler: 'rr' }, [d('a', 1), d('b', 0), d('c', 5)])), [['a', 0.5], ['c', 0.5]]);
  t.deepEqual(shares(ipvsSchedule({ scheduler: 'wrr' }, [d('a', 1), d('b', 0), d('c', 3)])), [['a', 0.25], ['c', 0.75]]);
  t.deepEqual(ipvsSchedule({ scheduler: 'rr' }, [d('a', 0)]), { kind: 'refused', reason: 'all 1 of its real servers have weight 0 (quiesced): IPVS refuses the connection (ICMP port unreachable)' });
  t.deepEqual(ipvsSchedule({ scheduler: 'lc' }, [d('a', 1), d('b', 2)]), {
    kind: 'unknown',
    reason: 'scheduler lc picks by the connection counts at the time of the connection; candidates: a:80 (weight 1), b:80 (weight 2)',
  });
  t.deepEqual(ipvsSchedule({ scheduler: 'rr' }, [d('a', 1, 10)]), {
    kind: 'unknown',
    reason: 'real server a:80 (weight 1) has a connection threshold (overload is not in the read-back); candidates: a:80 (weight 1)',
  });
});

test('diff --mode ipvs: no differences right after a sync', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  const drift = ipvsDrift(desired(), live, DRIFT_OPTS);
  t.is(formatIpvsDrift(drift), 'no differences\n');
  t.is(ipvsDriftCount(drift), 0);
});

test('diff --mode ipvs lists missing, extra and changed virtual and real servers, addresses, set entries and rules; foreign ones are not drift', async (t) => {
  const { w } = await touched();
  await w.ipvs.delDest(WEB, { address: '10.244.1.2', port: 8080 });
  await w.ipvs.newDest({ protocol: 'TCP', address: '10.96.0.11', port: 80 }, { address: '10.244.7.7', port: 80, weight: 1, forwarding: 'masq' });
  await w.ipvs.newService({ protocol: 'TCP', address: '10.100.0.1', port: 443, scheduler: 'rr' });
  await w.ipvs.setService({ protocol: 'TCP', address: '10.96.0.20', port: 443, scheduler: 'wrr' });
  await w.ipvs.delService({ protocol: 'UDP', address: '10.96.0.53', port: 53 });
  await w.ipset.restore('add KUBE-CLUSTER-IP 10.96.5.5,tcp:80\n');
  w.links.addByHand('kube-ipvs0', '10.96.9.9', 32);
  await w.iptables.restore('*nat\n:KUBE-MARK-MASQ - [0:0]\nCOMMIT\n'); // a chain line flushes it
  const drift = ipvsDrift(desired(), await readIpvsLive(w, { tables: true }), DRIFT_OPTS);
  t.is(
    formatIpvsDrift(drift),
    `extra entry KUBE-CLUSTER-IP 10.96.5.5,tcp:80
missing entry KUBE-LOOP-BACK 10.244.2.2,udp:53,10.244.2.2
missing address kube-ipvs0 10.96.0.53/32
extra address kube-ipvs0 10.96.9.9/32
extra virtual server TCP 10.100.0.1:443: rr
changed virtual server TCP 10.96.0.20:443 (default/sticky:https): rr persistent 600 s (kernel: wrr)
missing virtual server UDP 10.96.0.53:53 (kube-system/dns:dns): rr
missing real server TCP 10.96.0.10:80 -> 10.244.1.2:8080 (default/web:http): weight 1 Masq
changed real server TCP 10.96.0.10:80 -> 10.244.1.3:8080 (default/web:http): weight 1 Masq (kernel: weight 0 Masq)
extra real server TCP 10.96.0.11:80 -> 10.244.7.7:80 (default/empty:http)
missing real server UDP 10.96.0.53:53 -> 10.244.2.2:53 (kube-system/dns:dns): weight 1 Masq
changed chain nat KUBE-MARK-MASQ
  + -j MARK --set-xmark 0x4000/0x4000
`,
  );
  t.true(ipvsDriftCount(drift) > 0);
});

test('diff --mode ipvs lists an entry drover would never write (added by hand) as extra, and a scratch set left over', async (t) => {
  const w = await synced();
  const entries = w.ipset.entries('KUBE-CLUSTER-IP')!;
  w.ipset.setEntries('KUBE-CLUSTER-IP', 'hash:ip,port', [...entries, '10.96.0.10,icmp:echo-request']);
  w.ipset.setEntries('KUBE-LOOP-BACK-SWAP', 'hash:ip,port,ip', []);
  const drift = ipvsDrift(desired(), await readIpvsLive(w, { tables: true }), DRIFT_OPTS);
  t.is(formatIpvsDrift(drift), 'extra entry KUBE-CLUSTER-IP 10.96.0.10,icmp:echo-request\nextra set KUBE-LOOP-BACK-SWAP: left over by an interrupted rebuild\n');
  t.true(ipvsDriftCount(drift) > 0);
});

test('diff --mode ipvs on an empty node: the sets, kube-ipvs0 and everything else are missing', async (t) => {
  const drift = ipvsDrift(desiredIpvsState(snap(web('10.244.1.2')), { scheduler: 'rr' }), await readIpvsLive(new World(), { tables: true }), DRIFT_OPTS);
  t.is(
    formatIpvsDrift(drift),
    `missing set KUBE-CLUSTER-IP
missing entry KUBE-CLUSTER-IP 10.96.0.10,tcp:80
missing set KUBE-LOOP-BACK
missing entry KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2
missing set KUBE-EXTERNAL-IP
missing set KUBE-EXTERNAL-IP-LOCAL
missing set KUBE-LOAD-BALANCER
missing set KUBE-LOAD-BALANCER-FW
missing set KUBE-LOAD-BALANCER-LOCAL
missing set KUBE-LOAD-BALANCER-SOURCE-IP
missing set KUBE-LOAD-BALANCER-SOURCE-CIDR
missing set KUBE-NODE-PORT-TCP
missing set KUBE-NODE-PORT-LOCAL-TCP
missing set KUBE-NODE-PORT-UDP
missing set KUBE-NODE-PORT-LOCAL-UDP
missing set KUBE-NODE-PORT-SCTP
missing set KUBE-NODE-PORT-LOCAL-SCTP
missing set KUBE-HEALTH-CHECK-NODE-PORT
missing set KUBE-IPVS-IPS
missing entry KUBE-IPVS-IPS 10.96.0.10
missing set KUBE-EXTERNAL-NO-LOCAL
missing set KUBE-INTERNAL-NO-LOCAL
missing link kube-ipvs0
missing address kube-ipvs0 10.96.0.10/32
missing virtual server TCP 10.96.0.10:80 (default/web:http): rr
missing real server TCP 10.96.0.10:80 -> 10.244.1.2:8080 (default/web:http): weight 1 Masq
changed sysctl net.ipv4.vs.conntrack: 1 (kernel: 0)
changed sysctl net.ipv4.vs.expire_nodest_conn: 1 (kernel: 0)
changed sysctl net.ipv4.vs.expire_quiescent_template: 1 (kernel: 0)
changed sysctl net.ipv4.ip_forward: 1 (kernel: 0)
missing chain nat KUBE-SERVICES
missing chain nat KUBE-MARK-MASQ
missing chain nat KUBE-POSTROUTING
missing chain nat KUBE-NODE-PORT
missing chain nat KUBE-LOAD-BALANCER
missing hook nat PREROUTING: -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
missing hook nat OUTPUT: -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
missing hook nat POSTROUTING: -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
missing chain filter KUBE-SERVICES
missing chain filter KUBE-PROXY-FIREWALL
missing chain filter KUBE-FORWARD
missing chain filter KUBE-NODE-PORT
missing chain filter KUBE-SOURCE-RANGES-FIREWALL
missing chain filter KUBE-IPVS-FILTER
missing chain filter KUBE-IPVS-OUT-FILTER
missing hook filter INPUT: -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
missing hook filter INPUT: -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
missing hook filter INPUT: -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
missing hook filter OUTPUT: -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
missing hook filter FORWARD: -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
missing hook filter FORWARD: -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
`,
  );
});

test('status --mode ipvs: virtual and real servers, ipset entries and kube-ipvs0 from the kernel', async (t) => {
  const { live } = await touched();
  const sync = { at: '2025-06-01T10:00:00.000Z', kind: 'full', durationMs: 31.4, error: null, services: 4, endpoints: 5 } as const;
  const record: StatusRecord = {
    version: 1,
    pid: 4242,
    mode: 'ipvs',
    iptablesBackend: 'auto',
    netns: null,
    source: '/etc/drover/manifests',
    render: { clusterCidr: '10.244.0.0/16', masqueradeAll: false, serviceCidr: '10.96.0.0/12' },
    ipvs: { scheduler: 'rr' },
    lastSync: sync,
    lastSuccess: sync,
  };
  t.is(
    formatStatus({
      file: '/run/drover/status.json',
      record,
      running: true,
      rules: { filter: 3, nat: 9 },
      modeLines: ipvsStatusLines(ipvsCounts(live)),
      drift: { differences: 3 },
      now: Date.parse('2025-06-01T10:01:00.000Z'),
    }),
    `status file: /run/drover/status.json (pid 4242, running)
mode:        ipvs
source:      /etc/drover/manifests (--cluster-cidr 10.244.0.0/16 --service-cidr 10.96.0.0/12)
services:    4 service ports, 5 endpoints (last successful sync)
ipvs:        5 virtual servers, 4 real servers (1 at weight 0) in the kernel
ipsets:      11 entries (KUBE-CLUSTER-IP 4, KUBE-LOOP-BACK 3, KUBE-IPVS-IPS 4)
kube-ipvs0:  3 addresses
rules:       12 drover-owned rules in the kernel (filter 3, nat 9)
last sync:   2025-06-01T10:00:00.000Z (1 min ago), full, 31.4 ms, ok
drift:       yes, 3 differences (drover diff lists them)
`,
  );
});

test('diff --mode ipvs: a sysctl changed by hand is drift; a draining real server is a note, not drift; every compared field is printed', async (t) => {
  const w = await synced();
  t.is(ipvsDriftCount(ipvsDrift(desired(), await readIpvsLive(w, { tables: true }), DRIFT_OPTS)), 0);
  // An endpoint removed while it has connections: the sync quiesces it and waits.
  const fewer = snap(web('10.244.1.2'), dns('10.244.2.2'), empty, sticky);
  w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.3:8080', 3, 1);
  await w.backend().sync(fewer, { full: true, changed: new Set() });
  const wanted = desiredIpvsState(fewer, { scheduler: 'rr' });
  const draining = ipvsDrift(wanted, await readIpvsLive(w, { tables: true }), DRIFT_OPTS);
  t.is(formatIpvsDrift(draining), 'no differences\nnote: draining real server TCP 10.96.0.10:80 -> 10.244.1.3:8080: weight 0, 3 active and 1 inactive connections\n');
  t.is(ipvsDriftCount(draining), 0);

  await w.sysctls.write('net.ipv4.vs.conntrack', '0');
  await w.ipvs.setDest(WEB, { address: '10.244.1.2', port: 8080, weight: 1, forwarding: 'masq', upperThreshold: 100 });
  await w.ipvs.setService({ protocol: 'TCP', address: '10.96.0.11', port: 80, scheduler: 'rr', netmask: 0xffffff00 });
  const drift = ipvsDrift(wanted, await readIpvsLive(w, { tables: true }), DRIFT_OPTS);
  t.is(
    formatIpvsDrift(drift),
    `changed virtual server TCP 10.96.0.11:80 (default/empty:http): rr (kernel: rr netmask 255.255.255.0)
changed real server TCP 10.96.0.10:80 -> 10.244.1.2:8080 (default/web:http): weight 1 Masq (kernel: weight 1 Masq thresholds 0-100)
changed sysctl net.ipv4.vs.conntrack: 1 (kernel: 0)
note: draining real server TCP 10.96.0.10:80 -> 10.244.1.3:8080: weight 0, 3 active and 1 inactive connections
`,
  );
  t.true(ipvsDriftCount(drift) > 0);
});

test('a catch-all virtual server (port 0): chains shows it without a set entry, trace follows the kernel to it', async (t) => {
  // The encoder refuses port 0 (drover never writes one), so the live state gets it as a kernel dump would.
  const w = await synced();
  await w.links.addAddress((await w.links.find('kube-ipvs0'))!, '10.96.5.5');
  const read = await readIpvsLive(w, { tables: true });
  const all = { protocol: 'TCP', address: '10.96.5.5', port: 0 } as const;
  const live: IpvsLive = {
    ...read,
    virtualServers: new Map([
      ...read.virtualServers,
      [
        'TCP/10.96.5.5:0',
        {
          entry: { ...all, scheduler: 'rr', persistent: { timeoutSeconds: 300 }, netmask: 0xffffffff, flags: 0x3 },
          dests: [{ address: '10.244.1.2', port: 0, weight: 1, forwarding: 'masq', upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, persistConns: 0 }],
        },
      ],
    ]),
  };
  const text = formatIpvsChains(ipvsServicePortViews(live), false);
  t.true(text.includes('KUBE-CLUSTER-IP: (none: no entry holds port 0)'), text);
  const out = formatTrace(trace(ctxOf(live), pkt('192.168.100.2', '10.96.5.5', 443)), ipvsTraceFormat);
  t.true(out.includes('no IPVS virtual server for TCP 10.96.5.5:443; the catch-all virtual server TCP 10.96.5.5:0 takes the connection'), out);
  t.true(out.includes('ipvs TCP 10.96.5.5:0 rr'), out);
});

test('virtual servers drover does not model (fwmark) are named in one note; none, no note', (t) => {
  t.is(unsupportedNote({ unsupported: [] }, 'not shown'), '');
  t.is(
    unsupportedNote({ unsupported: ['fwmark 0x1 rr', 'fwmark 0x2 rr'] }, 'not evaluated (the trace assumes none of them takes the packet)'),
    'drover: fwmark virtual servers not evaluated (the trace assumes none of them takes the packet): fwmark 0x1 rr; fwmark 0x2 rr\n',
  );
});

test('diff --mode ipvs on an incomplete source keeps a NodePort virtual server without binding the node\'s own IP', async (t) => {
  const w = new World();
  const nodeAddresses = { nodePortIPs: ['192.168.1.10'], hostAddresses: ['192.168.1.10'] };
  const np = sp('default/np:http', '10.96.0.50', 80, [ep('10.244.1.7:8080')], { type: 'NodePort', frontends: ipv4Frontends('10.96.0.50', 30080) });
  await w.backend({ nodeAddresses }).sync(snap(web('10.244.1.2'), np), { full: true, changed: new Set<string>() });
  const drift = ipvsDrift(desiredIpvsState(snap(web('10.244.1.2')), { scheduler: 'rr', nodeAddresses }), await readIpvsLive(w, { tables: true }), {
    ...DRIFT_OPTS,
    hostAddresses: nodeAddresses.hostAddresses,
    incomplete: true,
  });
  // What the backend's full sync writes there (ipvs-backend.test.ts): no kube-ipvs0 address, no KUBE-IPVS-IPS entry.
  t.is(formatIpvsDrift(drift), 'missing entry KUBE-CLUSTER-IP 192.168.1.10,tcp:30080\nextra entry KUBE-NODE-PORT-TCP 30080\n');
});

test("trace --mode ipvs: the node's own connections to a LoadBalancer IP its source ranges leave out, and to an internalTrafficPolicy Local ClusterIP with endpoints elsewhere only, are marked in nat OUTPUT and dropped in filter OUTPUT", async (t) => {
  const lb = (name: string, ip: string, vip: string, ranges: string[]) =>
    sp(`default/${name}:http`, ip, 80, [ep('10.244.1.2:8080', { nodeName: 'n1' })], {
      type: 'LoadBalancer',
      frontends: { ...ipv4Frontends(ip), loadBalancerIngress: [{ family: 'IPv4', ip: vip, ipMode: 'VIP' }], loadBalancerSourceRanges: ranges },
    });
  const itp = sp('default/itp:http', '10.96.0.30', 80, [ep('10.244.2.2:8080', { nodeName: 'n2' })], { internalTrafficPolicy: 'Local' });
  const w = new World();
  const closed = lb('closed', '10.96.0.31', '198.51.100.10', ['10.244.9.0/24']);
  // A range that holds the node's InternalIP lets the node in, from its own address and from the VIP (kube-proxy's allowFromNode).
  const open = lb('open', '10.96.0.32', '198.51.100.11', ['192.168.100.0/24']);
  await w.backend().sync({ ...snap(closed, open, itp), node: { name: 'n1', addresses: [{ type: 'InternalIP', address: NODE }] } }, { full: true, changed: new Set() });
  const live = await readIpvsLive(w, { tables: true });
  t.false(live.virtualServers.has('TCP/10.96.0.30:80'), 'no virtual server for the internalTrafficPolicy Local ClusterIP');
  const OUT_FILTER_DROP = '-m mark --mark 0x8000/0x8000 -m comment --comment "connections from the node itself marked for dropping in nat KUBE-SERVICES" -j DROP';
  /** The one outcome of `r`: dropped by that rule, after `marked` marked it in nat KUBE-SERVICES. */
  const droppedAfter = (r: ReturnType<typeof trace>, marked: string, what: string) => {
    t.is(r.outcomes.length, 1, what);
    const o = r.outcomes[0]!;
    const last = o.steps.at(-1)!;
    t.is(last.rule, OUT_FILTER_DROP, what);
    t.deepEqual(summary(r), [{ p: 1, verdict: { kind: 'drop', table: 'filter', chain: 'KUBE-IPVS-OUT-FILTER', line: last.line }, masq: false }], what);
    t.true(o.steps.some((s) => s.table === 'nat' && s.chain === 'KUBE-SERVICES' && s.rule.includes(marked) && s.rule.endsWith('-j MARK --set-xmark 0x8000/0x8000')), `${what}: marked in nat KUBE-SERVICES`);
  };
  for (const src of [NODE, '198.51.100.10']) {
    const r = trace(ctxOf(live), pkt(src, '198.51.100.10', 80));
    t.is(r.origin, 'node', src);
    droppedAfter(r, 'from the node itself outside the ranges', `from ${src}`);
  }
  for (const src of [NODE, '198.51.100.11']) {
    t.deepEqual(summary(trace(ctxOf(live), pkt(src, '198.51.100.11', 80))), [{ p: 1, verdict: { kind: 'dnat', ip: '10.244.1.2', port: 8080 }, masq: true }], `from ${src}: allowed`);
  }
  // A client inside the range is not marked (it is not the node); one outside is dropped in filter INPUT as before.
  t.deepEqual(summary(trace(ctxOf(live), pkt('10.244.9.5', '198.51.100.10', 80))), [{ p: 1, verdict: { kind: 'dnat', ip: '10.244.1.2', port: 8080 }, masq: true }]);
  t.deepEqual(summary(trace(ctxOf(live), pkt('203.0.113.9', '198.51.100.10', 80))).map((o) => o.verdict.kind), ['drop']);
  // internalTrafficPolicy Local: the node is dropped in filter OUTPUT (IPVS has no virtual server to refuse it with), a pod in filter INPUT.
  const fromNode = trace(ctxOf(live), pkt(NODE, '10.96.0.30', 80));
  droppedAfter(fromNode, 'internalTrafficPolicy Local service ports with no local endpoints, from the node itself', 'internalTrafficPolicy Local from the node');
  t.deepEqual(fromNode.outcomes[0]!.notes, ['no IPVS virtual server for TCP 10.96.0.30:80']);
  t.deepEqual(summary(trace(ctxOf(live), pkt('10.244.1.5', '10.96.0.30', 80))).map((o) => `${o.verdict.kind} ${'chain' in o.verdict ? o.verdict.chain : ''}`), ['drop KUBE-PROXY-FIREWALL']);
  // chains names the service port and says why it has no virtual server; diff finds nothing missing.
  const node = { name: 'n1', addresses: [{ type: 'InternalIP' as const, address: NODE }] };
  const want = desiredIpvsState({ ...snap(closed, open, itp), node }, { scheduler: 'rr' });
  const chains = formatIpvsChains(selectServicePorts(ipvsServicePortViews(live, want.virtualServers, new Map(), want.withheld), 'default/itp', 'in --source'), true);
  t.is(
    chains,
    `# default/itp:http: no virtual server TCP 10.96.0.30:80 (internalTrafficPolicy Local with endpoints on other nodes only: new connections are dropped)
  kube-ipvs0: 10.96.0.30/32 bound
  KUBE-CLUSTER-IP: 10.96.0.30,tcp:80
`,
  );
  t.is(formatIpvsDrift(ipvsDrift(want, live, DRIFT_OPTS)), 'no differences\n');
});


test('diff --mode ipvs: a withheld ClusterIP virtual server whose real server drains is a note, not drift', async (t) => {
  const w = new World();
  const node = { name: 'n1', addresses: [{ type: 'InternalIP' as const, address: '10.0.0.5' }] };
  const itp = (...endpoints: ReturnType<typeof ep>[]): Snapshot => ({ ...snap(sp('default/itp:http', '10.96.0.20', 80, endpoints, { internalTrafficPolicy: 'Local' })), node });
  await w.backend().sync(itp(ep('10.244.1.2:8080', { nodeName: 'n1' })), { full: true, changed: new Set() });
  w.ipvs.setConns('TCP/10.96.0.20:80', '10.244.1.2:8080', 2, 0);
  const elsewhere = itp(ep('10.244.2.2:8080', { nodeName: 'n2' }));
  await w.backend().sync(elsewhere, { full: true, changed: new Set() });
  const drift = ipvsDrift(desiredIpvsState(elsewhere, { scheduler: 'rr' }), await readIpvsLive(w, { tables: true }), DRIFT_OPTS);
  t.is(formatIpvsDrift(drift), 'no differences\nnote: draining real server TCP 10.96.0.20:80 -> 10.244.1.2:8080: weight 0, 2 active and 0 inactive connections\n');
  t.is(ipvsDriftCount(drift), 0);
});
