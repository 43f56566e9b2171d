/** The IPVS backend on in-memory fakes: what each sync sends, restart adoption, drift repair, graceful termination. */
import test from 'ava';
import { otherSets } from '../support/ipvs-sets.ts';
import { planToRestore } from '../../src/kernel/iptables/plan.ts';
import { IpvsApplyError } from '../../src/modes/ipvs/kernel.ts';
import { IpvsRequestError } from '../../src/kernel/ipvs/client.ts';
import { ipvsRulesPlan, ipvsStaticRules } from '../../src/modes/ipvs/rules.ts';
import { ipv4Frontends, type Snapshot } from '../../src/model/types.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { ipvsDetail } from '../../src/modes/ipvs/sync-detail.ts';
import { base, dns, empty, RENDER, web, World } from '../support/ipvs-world.ts';

const FULL = { full: true, changed: new Set<string>() };
const partial = (...keys: string[]) => ({ full: false, changed: new Set(keys) });
test('first sync: sysctls, kube-ipvs0, ipsets, iptables rules and IPVS, exactly', async (t) => {
  const w = new World();
  const result = await w.backend().sync(base(), FULL);
  t.deepEqual(w.sysctls.writes, [
    'net.ipv4.vs.conntrack=1',
    'net.ipv4.vs.expire_nodest_conn=1',
    'net.ipv4.vs.expire_quiescent_template=1',
    'net.ipv4.ip_forward=1',
  ]);
  t.deepEqual(w.links.log, ['create kube-ipvs0', 'add 10.96.0.10/32', 'add 10.96.0.11/32', 'add 10.96.0.53/32']);
  t.deepEqual(w.ipvs.log, [
    'NEW_SERVICE TCP/10.96.0.10:80 rr',
    'NEW_SERVICE TCP/10.96.0.11:80 rr',
    'NEW_SERVICE UDP/10.96.0.53:53 rr',
    'NEW_DEST TCP/10.96.0.10:80 10.244.1.2:8080 w1',
    'NEW_DEST TCP/10.96.0.10:80 10.244.1.3:8080 w1',
    'NEW_DEST UDP/10.96.0.53:53 10.244.2.2:53 w1',
  ]);
  t.deepEqual(w.ipset.restores, [
    [
      'create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536',
      'add KUBE-CLUSTER-IP 10.96.0.10,tcp:80',
      'add KUBE-CLUSTER-IP 10.96.0.11,tcp:80',
      'add KUBE-CLUSTER-IP 10.96.0.53,udp:53',
      'create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536',
      'add KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2',
      'add KUBE-LOOP-BACK 10.244.1.3,tcp:8080,10.244.1.3',
      'add KUBE-LOOP-BACK 10.244.2.2,udp:53,10.244.2.2',
      // The frontend sets, empty: no service port here has a NodePort, external IP or LoadBalancer IP.
      ...otherSets(['10.96.0.10', '10.96.0.11', '10.96.0.53']),
      '',
    ].join('\n'),
  ]);
  t.deepEqual(w.iptables.restores, [planToRestore(ipvsRulesPlan(ipvsStaticRules(RENDER), new Map()))]);
  t.like(result, { full: true, services: 3, endpoints: 3, written: { chain: 12 }, deleted: { chain: 0, rule: 0 }, transactions: 2 });
  t.deepEqual(w.ipvs.list(), [
    'TCP 10.96.0.10:80 rr',
    '  -> 10.244.1.2:8080 Masq 1',
    '  -> 10.244.1.3:8080 Masq 1',
    'TCP 10.96.0.11:80 rr',
    'UDP 10.96.0.53:53 rr',
    '  -> 10.244.2.2:53 Masq 1',
  ]);
});

test('restart: a new backend adopts the live state and writes nothing', async (t) => {
  const w = new World();
  await w.backend().sync(base(), FULL);
  const before = w.writes();
  const restarted = w.backend();
  const result = await restarted.sync(base(), FULL);
  t.deepEqual(w.writes(), before);
  t.like(result, { full: true, bytes: 0, transactions: 0, applyMs: 0 });
  t.deepEqual(ipvsDetail(result)?.ops, { 'add-service': 0, 'edit-service': 0, 'del-service': 0, 'add-dest': 0, 'edit-dest': 0, 'quiesce-dest': 0, 'del-dest': 0 });
});

test('restart: stale weights are reset to 1', async (t) => {
  const w = new World();
  await w.backend().sync(base(), FULL);
  await w.ipvs.setDest({ protocol: 'TCP', address: '10.96.0.10', port: 80 }, { address: '10.244.1.3', port: 8080, weight: 0, forwarding: 'masq' });
  const n = w.ipvs.log.length;
  await w.backend().sync(base(), FULL);
  t.deepEqual(w.ipvs.log.slice(n), ['SET_DEST TCP/10.96.0.10:80 10.244.1.3:8080 w1']);
});

test('drift: a deleted real server comes back; an extra virtual server in the service CIDR goes; one outside stays', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  await w.ipvs.delDest({ protocol: 'TCP', address: '10.96.0.10', port: 80 }, { address: '10.244.1.2', port: 8080 });
  await w.ipvs.newService({ protocol: 'TCP', address: '10.100.0.1', port: 443, scheduler: 'wrr' });
  await w.ipvs.newService({ protocol: 'TCP', address: '192.168.50.1', port: 80, scheduler: 'rr' });
  w.links.addByHand('kube-ipvs0', '10.96.7.7', 32);
  w.ipset.setEntries('KUBE-CLUSTER-IP', 'hash:ip,port', ['10.96.0.10,tcp:80', '10.96.0.11,tcp:80', '10.96.0.53,udp:53', '10.96.9.9,tcp:1']);
  const n = w.ipvs.log.length;
  const links = w.links.log.length;
  await backend.sync(base(), FULL);
  t.deepEqual(w.ipvs.log.slice(n), ['DEL_SERVICE TCP/10.100.0.1:443', 'NEW_DEST TCP/10.96.0.10:80 10.244.1.2:8080 w1']);
  t.deepEqual(w.links.log.slice(links), ['del 10.96.7.7/32']);
  t.deepEqual(w.ipset.restores.at(-1), 'del KUBE-CLUSTER-IP 10.96.9.9,tcp:1\n');
  t.true(w.ipvs.list().includes('TCP 192.168.50.1:80 rr'));
});

test('drift: an entry added by hand that drover would never write (icmp) does not fail the sync; the set is rebuilt and swapped in', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  const want = w.ipset.entries('KUBE-CLUSTER-IP');
  w.ipset.setEntries('KUBE-CLUSTER-IP', 'hash:ip,port', [...want!, '10.96.0.10,icmp:echo-request']);
  const result = await backend.sync(base(), FULL);
  t.true(result.full);
  t.deepEqual(w.ipset.entries('KUBE-CLUSTER-IP'), want);
  t.is(w.ipset.entries('KUBE-CLUSTER-IP-SWAP'), undefined);
  t.notRegex(w.ipset.restores.at(-1)!, /icmp/);
  t.regex(w.ipset.restores.at(-1)!, /^swap KUBE-CLUSTER-IP-SWAP KUBE-CLUSTER-IP$/m);
  const n = w.ipset.restores.length;
  await backend.sync(base(), FULL);
  t.is(w.ipset.restores.length, n, 'the next full sync finds nothing to write');
});

test('a virtual server on an address bound to kube-ipvs0 is drover\'s even outside the service CIDR', async (t) => {
  const w = new World();
  const outside = sp('default/out:http', '172.20.0.5', 80, [ep('10.244.1.2:80')]);
  const backend = w.backend();
  await backend.sync(snap(outside), FULL);
  await backend.sync(snap(), FULL);
  t.deepEqual(w.ipvs.list(), []);
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), []);
});

test('partial sync: only the changed service port is read and written', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  const requests = w.ipvs.requests;
  const n = w.ipvs.log.length;
  const reads = [w.ipset.saves, w.links.reads, w.iptables.saves];
  const next = snap(web('10.244.1.2', '10.244.1.3', '10.244.1.4'), dns('10.244.2.2'), empty);
  const result = await backend.sync(next, partial('default/web:http'));
  t.false(result.full);
  t.deepEqual([w.ipset.saves, w.links.reads, w.iptables.saves], reads, 'ipsets, kube-ipvs0 and iptables are compared with what drover wrote');
  t.deepEqual(w.ipvs.log.slice(n), ['NEW_DEST TCP/10.96.0.10:80 10.244.1.4:8080 w1']);
  // GET_SERVICE + GET_DEST of one virtual server, then one NEW_DEST.
  t.is(w.ipvs.requests - requests, 3);
  t.is(w.ipset.restores.at(-1), 'add KUBE-LOOP-BACK 10.244.1.4,tcp:8080,10.244.1.4\n');
  t.is(w.iptables.restores.length, 1, 'iptables rules are not read or written by a partial sync');
});

test('partial sync after drift: trusts what it wrote; the next full sync repairs', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  w.ipset.setEntries('KUBE-LOOP-BACK', 'hash:ip,port,ip', []);
  const next = snap(web('10.244.1.2', '10.244.1.3', '10.244.1.4'), dns('10.244.2.2'), empty);
  await backend.sync(next, partial('default/web:http'));
  t.deepEqual(w.ipset.entries('KUBE-LOOP-BACK'), ['10.244.1.4,tcp:8080,10.244.1.4']);
  await backend.sync(next, FULL);
  t.deepEqual(w.ipset.entries('KUBE-LOOP-BACK'), [
    '10.244.1.2,tcp:8080,10.244.1.2',
    '10.244.1.3,tcp:8080,10.244.1.3',
    '10.244.1.4,tcp:8080,10.244.1.4',
    '10.244.2.2,udp:53,10.244.2.2',
  ]);
});

test('partial sync: a removed service port loses its virtual server and its ClusterIP', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  const n = w.ipvs.log.length;
  await backend.sync(snap(web('10.244.1.2', '10.244.1.3'), dns('10.244.2.2')), partial('default/empty:http'));
  t.deepEqual(w.ipvs.log.slice(n), ['DEL_SERVICE TCP/10.96.0.11:80']);
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), ['10.96.0.10/32', '10.96.0.53/32']);
  t.false(w.ipset.entries('KUBE-CLUSTER-IP')!.includes('10.96.0.11,tcp:80'));
});

test('partial sync: a removed port of a multi-port service keeps the shared ClusterIP and the hairpin entry another port still needs', async (t) => {
  const w = new World();
  const backend = w.backend();
  const alt = sp('default/web:alt', '10.96.0.10', 8080, [ep('10.244.1.2:8080')]);
  await backend.sync(snap(web('10.244.1.2', '10.244.1.3'), alt), FULL);
  const [n, links] = [w.ipvs.log.length, w.links.log.length];
  await backend.sync(snap(alt), partial('default/web:http'));
  t.deepEqual(w.ipvs.log.slice(n), ['DEL_SERVICE TCP/10.96.0.10:80']);
  t.deepEqual(w.links.log.slice(links), [], '10.96.0.10 stays on kube-ipvs0 for default/web:alt');
  t.is(w.ipset.restores.at(-1), 'del KUBE-CLUSTER-IP 10.96.0.10,tcp:80\ndel KUBE-LOOP-BACK 10.244.1.3,tcp:8080,10.244.1.3\n');
  // What the partial syncs left is what a full sync wants: it finds nothing to write.
  const writes = w.writes();
  await backend.sync(snap(alt), FULL);
  t.deepEqual(w.writes(), writes);
  await backend.sync(snap(), partial('default/web:alt'));
  t.deepEqual(w.links.log.slice(links), ['del 10.96.0.10/32']);
  t.deepEqual([w.ipset.entries('KUBE-CLUSTER-IP'), w.ipset.entries('KUBE-LOOP-BACK')], [[], []]);
});

test('graceful termination: quiesced, kept while connections last, deleted when they end', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.3:8080', 1, 0);
  const n = w.ipvs.log.length;
  const fewer = snap(web('10.244.1.2'), dns('10.244.2.2'), empty);
  await backend.sync(fewer, partial('default/web:http'));
  t.deepEqual(w.ipvs.log.slice(n), ['SET_DEST TCP/10.96.0.10:80 10.244.1.3:8080 w0']);
  t.deepEqual(backend.pendingRemovals().map((p) => `${p.rs.address}:${p.rs.port}`), ['10.244.1.3:8080']);
  t.is(await backend.checkGraceful(), 0, 'still connected: kept');
  await backend.sync(fewer, FULL);
  t.deepEqual(w.ipvs.log.slice(n), ['SET_DEST TCP/10.96.0.10:80 10.244.1.3:8080 w0'], 'a resync leaves it quiesced');
  w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.3:8080', 0, 0);
  t.is(await backend.checkGraceful(), 1);
  t.deepEqual(w.ipvs.log.slice(n + 1), ['DEL_DEST TCP/10.96.0.10:80 10.244.1.3:8080']);
  t.deepEqual(backend.pendingRemovals(), []);
});

test('graceful termination: deleted when the graceful period is over, even with connections', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.3:8080', 0, 4);
  await backend.sync(snap(web('10.244.1.2'), dns('10.244.2.2'), empty), partial('default/web:http'));
  w.clock += 59_999;
  t.is(await backend.checkGraceful(), 0);
  w.clock += 1;
  t.is(await backend.checkGraceful(), 1);
  t.false(w.ipvs.list().includes('  -> 10.244.1.3:8080 Masq 0'));
});

test('graceful termination: an endpoint that comes back is restored to weight 1', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.3:8080', 2, 0);
  await backend.sync(snap(web('10.244.1.2'), dns('10.244.2.2'), empty), partial('default/web:http'));
  const n = w.ipvs.log.length;
  await backend.sync(base(), partial('default/web:http'));
  t.deepEqual(w.ipvs.log.slice(n), ['SET_DEST TCP/10.96.0.10:80 10.244.1.3:8080 w1']);
  t.deepEqual(backend.pendingRemovals(), []);
});

test('graceful termination: UDP real servers are deleted at once', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(snap(dns('10.244.2.2', '10.244.2.3')), FULL);
  w.ipvs.setConns('UDP/10.96.0.53:53', '10.244.2.3:53', 0, 9);
  const n = w.ipvs.log.length;
  await backend.sync(snap(dns('10.244.2.2')), partial('kube-system/dns:dns'));
  t.deepEqual(w.ipvs.log.slice(n), ['DEL_DEST UDP/10.96.0.53:53 10.244.2.3:53']);
  t.deepEqual(backend.pendingRemovals(), []);
});

test('graceful termination: the periodic check runs on its own while real servers are pending', async (t) => {
  const w = new World();
  const backend = w.backend({ gracefulCheckIntervalMs: 20 });
  try {
    await backend.sync(base(), FULL);
    w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.3:8080', 1, 0);
    await backend.sync(snap(web('10.244.1.2'), dns('10.244.2.2'), empty), partial('default/web:http'));
    w.ipvs.setConns('TCP/10.96.0.10:80', '10.244.1.3:8080', 0, 0);
    const deadline = Date.now() + 5000;
    while (backend.pendingRemovals().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    t.deepEqual(backend.pendingRemovals(), []);
    t.is(w.ipvs.log.at(-1), 'DEL_DEST TCP/10.96.0.10:80 10.244.1.3:8080');
  } finally {
    backend.close();
  }
});

test('a failed command fails the sync, names the command, and makes the next sync full and repairing', async (t) => {
  const w = new World();
  const backend = w.backend();
  w.ipvs.failNext('NEW_DEST', new IpvsRequestError('NEW_DEST', 'ENOMEM', 12));
  const error = await t.throwsAsync(backend.sync(base(), FULL), { instanceOf: IpvsApplyError });
  t.regex(error!.message, /^1 of 6 IPVS commands failed; first: add-dest TCP\/10\.96\.0\.10:80 -> 10\.244\.1\.2:8080 w1: IPVS NEW_DEST failed: ENOMEM$/);
  const n = w.ipvs.log.length;
  const result = await backend.sync(base(), partial('default/web:http'));
  t.true(result.full);
  t.deepEqual(w.ipvs.log.slice(n), ['NEW_DEST TCP/10.96.0.10:80 10.244.1.2:8080 w1']);
});

test('scheduler and session affinity reach the kernel; a change is an edit, not a re-create', async (t) => {
  const w = new World();
  const sticky = (timeoutSeconds: number) => sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')], { sessionAffinity: { timeoutSeconds } });
  await w.backend({ scheduler: 'wlc' }).sync(snap(sticky(10800)), FULL);
  t.deepEqual(w.ipvs.list(), ['TCP 10.96.0.10:80 wlc persistent 10800', '  -> 10.244.1.2:8080 Masq 1']);
  await w.backend({ scheduler: 'wlc' }).sync(snap(sticky(60)), FULL);
  t.is(w.ipvs.log.at(-1), 'SET_SERVICE TCP/10.96.0.10:80 wlc persistent 60');
});

test('cleanup removes owned virtual servers, kube-ipvs0, the ipsets and the rules; foreign ones stay', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  await w.ipvs.newService({ protocol: 'TCP', address: '192.168.50.1', port: 80, scheduler: 'rr' });
  const result = await backend.cleanup();
  t.deepEqual(w.ipvs.list(), ['TCP 192.168.50.1:80 rr']);
  t.is(w.links.addressesOf('kube-ipvs0'), undefined);
  t.is(w.ipset.entries('KUBE-CLUSTER-IP'), undefined);
  t.is(w.ipset.entries('KUBE-LOOP-BACK'), undefined);
  t.deepEqual(result, { removed: { chain: 15, rule: 9, 'virtual server': 3, link: 1, set: 19 }, kept: [] }, '12 chains of IPVS mode and 3 canaries');
  t.notRegex(w.iptables.dump('nat'), /KUBE-/);
  t.notRegex(w.iptables.dump('filter'), /KUBE-/);
});

test('cleanup reports the iptables chains it could only empty, with the foreign rules that jump to them', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  w.iptables.setChain('nat', 'OPERATOR', ['-s 192.168.7.0/24 -j KUBE-MARK-MASQ', '-j KUBE-MARK-MASQ']);
  const result = await backend.cleanup();
  t.deepEqual(result, {
    removed: { chain: 14, rule: 9, 'virtual server': 3, link: 1, set: 19 },
    kept: [{ table: 'nat', chain: 'KUBE-MARK-MASQ', referencedBy: ['-A OPERATOR -s 192.168.7.0/24 -j KUBE-MARK-MASQ', '-A OPERATOR -j KUBE-MARK-MASQ'] }],
  });
  t.deepEqual(w.iptables.chain('nat', 'KUBE-MARK-MASQ'), []);
  t.deepEqual(w.iptables.chain('nat', 'OPERATOR'), ['-s 192.168.7.0/24 -j KUBE-MARK-MASQ', '-j KUBE-MARK-MASQ']);
  t.deepEqual(
    w.iptables.dump('nat').split('\n').filter((l) => l.includes('KUBE-')),
    [':KUBE-MARK-MASQ - [0:0]', '-A OPERATOR -s 192.168.7.0/24 -j KUBE-MARK-MASQ', '-A OPERATOR -j KUBE-MARK-MASQ'],
  );
  t.is(w.ipset.entries('KUBE-CLUSTER-IP'), undefined, 'the rest of the cleanup went ahead');
});

test('the backend refuses a bad service CIDR or graceful period', (t) => {
  const w = new World();
  t.throws(() => w.backend({ serviceCIDR: '10.96.0.0/12 -j ACCEPT' }), { message: /not an IPv4 CIDR/ });
  t.throws(() => w.backend({ gracefulPeriodMs: -1 }), { message: /not a non-negative duration/ });
});

test('incomplete source: a restarted full sync keeps every unlisted virtual server, its real servers, set entries and address; a whole one deletes them', async (t) => {
  const w = new World();
  await w.backend().sync(base(), FULL);
  const listBefore = w.ipvs.list();
  // Restart while the part of the source holding dns and empty cannot be read; web lost an endpoint.
  const restarted = w.backend();
  const INCOMPLETE = { full: true, changed: new Set<string>(), incomplete: true };
  const ipvsLog = w.ipvs.log.length;
  const linksLog = w.links.log.length;
  const restores = w.ipset.restores.length;
  await restarted.sync(snap(web('10.244.1.2')), INCOMPLETE);
  // The listed service port is repaired in full: its removed endpoint goes. Nothing else is touched.
  t.deepEqual(w.ipvs.log.slice(ipvsLog), ['DEL_DEST TCP/10.96.0.10:80 10.244.1.3:8080']);
  t.deepEqual(w.links.log.slice(linksLog), [], 'no address removed');
  t.deepEqual(w.ipset.restores.slice(restores), [['del KUBE-LOOP-BACK 10.244.1.3,tcp:8080,10.244.1.3', ''].join('\n')]);
  t.deepEqual(
    w.ipvs.list().filter((l) => !l.startsWith('  ')),
    listBefore.filter((l) => !l.startsWith('  ')),
  );
  t.true(w.ipvs.list().includes('  -> 10.244.2.2:53 Masq 1'));
  // The same source, whole: dns and empty go, with their entries and addresses.
  await restarted.sync(snap(web('10.244.1.2')), FULL);
  t.deepEqual(w.ipvs.list().filter((l) => !l.startsWith('  ')), ['TCP 10.96.0.10:80 rr']);
  t.deepEqual(w.links.log.slice(linksLog), ['del 10.96.0.11/32', 'del 10.96.0.53/32']);
  t.deepEqual(w.ipset.restores.slice(restores + 1), [
    ['del KUBE-CLUSTER-IP 10.96.0.11,tcp:80', 'del KUBE-CLUSTER-IP 10.96.0.53,udp:53', 'del KUBE-LOOP-BACK 10.244.2.2,udp:53,10.244.2.2', 'del KUBE-IPVS-IPS 10.96.0.11', 'del KUBE-IPVS-IPS 10.96.0.53', ''].join('\n'),
  ]);
});

test('incomplete source: a kept NodePort virtual server keeps no address; the node\'s own IP is never bound to kube-ipvs0 nor put in KUBE-IPVS-IPS', async (t) => {
  const w = new World();
  const NODE = { nodePortIPs: ['192.168.1.10'], hostAddresses: ['192.168.1.10'] };
  const np = sp('default/np:http', '10.96.0.50', 80, [ep('10.244.1.7:8080')], { type: 'NodePort', frontends: ipv4Frontends('10.96.0.50', 30080) });
  await w.backend({ nodeAddresses: NODE }).sync(snap(web('10.244.1.2', '10.244.1.3'), np), FULL);
  t.true(w.ipvs.list().includes('TCP 192.168.1.10:30080 rr'));
  // Restart while the part of the source holding np cannot be read; two full syncs.
  const restarted = w.backend({ nodeAddresses: NODE });
  const INCOMPLETE = { full: true, changed: new Set<string>(), incomplete: true };
  const linksLog = w.links.log.length;
  const restores = w.ipset.restores.length;
  await restarted.sync(snap(web('10.244.1.2', '10.244.1.3')), INCOMPLETE);
  await restarted.sync(snap(web('10.244.1.2', '10.244.1.3')), INCOMPLETE);
  // The ClusterIP stays bound; the node's address is neither bound nor in KUBE-IPVS-IPS.
  t.deepEqual(w.links.log.slice(linksLog), []);
  t.deepEqual(w.ipset.restores.slice(restores), [
    // The frontend sets get only what the snapshot wants; the kept virtual server gets its KUBE-CLUSTER-IP entry (keep.ts).
    ['add KUBE-CLUSTER-IP 192.168.1.10,tcp:30080', 'del KUBE-NODE-PORT-TCP 30080', ''].join('\n'),
  ]);
  t.deepEqual(w.ipset.entries('KUBE-IPVS-IPS'), ['10.96.0.10', '10.96.0.50']);
  const bound = await w.links.addresses((await w.links.find('kube-ipvs0'))!);
  t.deepEqual(bound.map((a) => a.address).sort(), ['10.96.0.10', '10.96.0.50']);
  // Both of np's virtual servers are kept, with their real servers.
  t.deepEqual(w.ipvs.list(), [
    'TCP 10.96.0.10:80 rr',
    '  -> 10.244.1.2:8080 Masq 1',
    '  -> 10.244.1.3:8080 Masq 1',
    'TCP 10.96.0.50:80 rr',
    '  -> 10.244.1.7:8080 Masq 1',
    'TCP 192.168.1.10:30080 rr',
    '  -> 10.244.1.7:8080 Masq 1',
  ]);
});

test('graceful termination: a ClusterIP that becomes withheld (internalTrafficPolicy Local, its local endpoint gone) keeps its connected real server draining', async (t) => {
  const w = new World();
  const backend = w.backend();
  const node = { name: 'n1', addresses: [{ type: 'InternalIP' as const, address: '10.0.0.5' }] };
  const itp = (...endpoints: ReturnType<typeof ep>[]) => ({ ...snap(sp('default/itp:http', '10.96.0.20', 80, endpoints, { internalTrafficPolicy: 'Local' })), node });
  await backend.sync(itp(ep('10.244.1.2:8080', { nodeName: 'n1' }), ep('10.244.2.2:8080', { nodeName: 'n2' })), FULL);
  t.deepEqual(w.ipvs.list(), ['TCP 10.96.0.20:80 rr', '  -> 10.244.1.2:8080 Masq 1']);
  // A connection is open to this node's endpoint when it leaves; only n2's endpoint is left.
  w.ipvs.setConns('TCP/10.96.0.20:80', '10.244.1.2:8080', 1, 0);
  const n = w.ipvs.log.length;
  await backend.sync(itp(ep('10.244.2.2:8080', { nodeName: 'n2' })), partial('default/itp:http'));
  // As for any other real server that goes away: quiesced while its connection lasts, not deleted with its virtual server.
  t.deepEqual(w.ipvs.log.slice(n), ['SET_DEST TCP/10.96.0.20:80 10.244.1.2:8080 w0']);
  t.deepEqual(backend.pendingRemovals().map((p) => `${p.rs.address}:${p.rs.port}`), ['10.244.1.2:8080']);
  t.is(await backend.driftCheck(), undefined, 'a withheld virtual server while its real server drains is not drift');
  await backend.sync(itp(ep('10.244.2.2:8080', { nodeName: 'n2' })), FULL);
  t.deepEqual(w.ipvs.list(), ['TCP 10.96.0.20:80 rr', '  -> 10.244.1.2:8080 Masq 0'], 'a full sync keeps it draining');
  // Once it has drained, the real server and the withheld virtual server go.
  w.ipvs.setConns('TCP/10.96.0.20:80', '10.244.1.2:8080', 0, 0);
  t.is(await backend.checkGraceful(), 1);
  t.deepEqual(w.ipvs.log.slice(n + 1), ['DEL_DEST TCP/10.96.0.20:80 10.244.1.2:8080', 'DEL_SERVICE TCP/10.96.0.20:80']);
  t.deepEqual(w.ipvs.list(), []);
  t.is(await backend.driftCheck(), undefined);
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), ['10.96.0.20/32'], 'the withheld ClusterIP stays bound');
});

test('graceful termination: a withheld virtual server with no connection left is deleted at once; a UDP one too', async (t) => {
  const w = new World();
  const backend = w.backend();
  const node = { name: 'n1', addresses: [{ type: 'InternalIP' as const, address: '10.0.0.5' }] };
  const itp = (protocol: 'TCP' | 'UDP', ...endpoints: ReturnType<typeof ep>[]) => ({ ...snap(sp('default/itp:p', '10.96.0.20', 80, endpoints, { internalTrafficPolicy: 'Local', protocol })), node });
  for (const protocol of ['TCP', 'UDP'] as const) {
    await backend.sync(itp(protocol, ep('10.244.1.2:8080', { nodeName: 'n1' })), FULL);
    if (protocol === 'UDP') w.ipvs.setConns('UDP/10.96.0.20:80', '10.244.1.2:8080', 3, 3);
    const n = w.ipvs.log.length;
    await backend.sync(itp(protocol, ep('10.244.2.2:8080', { nodeName: 'n2' })), partial('default/itp:p'));
    t.deepEqual(w.ipvs.log.slice(n), [`DEL_SERVICE ${protocol}/10.96.0.20:80`], protocol);
    t.deepEqual(backend.pendingRemovals(), []);
    await backend.sync(snap(), FULL);
  }
});

test('incomplete source: a withheld ClusterIP the snapshot lists is not kept as unlisted; its virtual server goes, or drains first', async (t) => {
  const w = new World();
  const backend = w.backend();
  const node = { name: 'n1', addresses: [{ type: 'InternalIP' as const, address: '10.0.0.5' }] };
  // Two internalTrafficPolicy Local ClusterIPs, with their endpoint on this node (n1) or on n2.
  const itp = (nodeName: string) => ({
    ...snap(
      sp('default/itp:http', '10.96.0.20', 80, [ep('10.244.1.2:8080', { nodeName })], { internalTrafficPolicy: 'Local' }),
      sp('default/idle:http', '10.96.0.21', 80, [ep('10.244.1.5:8080', { nodeName })], { internalTrafficPolicy: 'Local' }),
    ),
    node,
  });
  await backend.sync(itp('n1'), FULL);
  w.ipvs.setConns('TCP/10.96.0.20:80', '10.244.1.2:8080', 1, 0);
  // Both endpoints move to n2 while another part of the source cannot be read.
  const n = w.ipvs.log.length;
  await backend.sync(itp('n2'), { full: true, changed: new Set<string>(), incomplete: true });
  t.deepEqual(w.ipvs.log.slice(n), ['DEL_SERVICE TCP/10.96.0.21:80', 'SET_DEST TCP/10.96.0.20:80 10.244.1.2:8080 w0']);
  t.deepEqual(w.ipvs.list(), ['TCP 10.96.0.20:80 rr', '  -> 10.244.1.2:8080 Masq 0']);
  t.is(await backend.driftCheck(), undefined, 'nothing of an unlisted virtual server was kept');
});
