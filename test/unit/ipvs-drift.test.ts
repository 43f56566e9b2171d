/** IPVS mode's cheap drift check (drift.ts) and the backend's use of it, on the in-memory fakes. */
import test from 'ava';
import { addressDrift, checkWindow, MIN_REAL_SERVER_CHECKS, realServerChecks, realServerDrift, REAL_SERVER_ROUNDS, virtualServerDrift } from '../../src/modes/ipvs/drift.ts';
import { parseEntryCount } from '../../src/kernel/ipset/ipset.ts';
import type { DestEntry, ServiceEntry } from '../../src/kernel/ipvs/codec.ts';
import type { DesiredVirtualServer } from '../../src/modes/ipvs/desired.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { base, World } from '../support/ipvs-world.ts';
import { IpvsClientClosedError } from '../../src/kernel/ipvs/client.ts';

const FULL = { full: true, changed: new Set<string>() };
const WEB = { protocol: 'TCP' as const, address: '10.96.0.10', port: 80 };

const want: DesiredVirtualServer = {
  key: 'TCP/10.96.0.10:80',
  servicePort: 'default/web:http',
  vs: { ...WEB, scheduler: 'rr' },
  reals: new Map([
    ['10.244.1.2:8080', { address: '10.244.1.2', port: 8080, weight: 1, forwarding: 'masq' as const }],
    ['10.244.1.3:8080', { address: '10.244.1.3', port: 8080, weight: 1, forwarding: 'masq' as const }],
  ]),
};
const entry = (over: Partial<ServiceEntry> = {}): ServiceEntry => ({ ...WEB, scheduler: 'rr', netmask: 0xffffffff, flags: 0x2, ...over });
const dest = (address: string, over: Partial<DestEntry> = {}): DestEntry => ({
  address, port: 8080, weight: 1, forwarding: 'masq', upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, persistConns: 0, ...over,
});
const programmed = { server: (key: string) => (key === want.key ? want : undefined), serverCount: 1 };
const inServiceCIDR = (vs: { address: string }) => vs.address.startsWith('10.96.');

test('virtual servers: equal, missing, edited, or an extra one in drover\'s range (one outside it is not drover\'s)', (t) => {
  t.is(virtualServerDrift(programmed, [entry(), entry({ address: '192.168.1.1' })], inServiceCIDR), undefined);
  t.is(virtualServerDrift(programmed, [], inServiceCIDR), '1 of 1 virtual servers drover programmed are gone from the kernel');
  t.is(virtualServerDrift(programmed, [entry({ scheduler: 'wrr' })], inServiceCIDR), 'virtual server TCP/10.96.0.10:80 has another scheduler, persistence or netmask than drover programmed');
  t.is(virtualServerDrift(programmed, [entry(), entry({ port: 443 })], inServiceCIDR), 'virtual server TCP/10.96.0.10:443 is in the kernel, and drover did not program it');
});

test('real servers: equal, missing, edited, or an extra one that is not draining', (t) => {
  const none = new Map();
  t.is(realServerDrift(want, [dest('10.244.1.2'), dest('10.244.1.3')], none), undefined);
  t.is(realServerDrift(want, [dest('10.244.1.2')], none), '1 of 2 real servers of TCP/10.96.0.10:80 are gone from the kernel');
  t.is(realServerDrift(want, [dest('10.244.1.2', { weight: 0 }), dest('10.244.1.3')], none), 'real server 10.244.1.2:8080 of TCP/10.96.0.10:80 has another weight, forwarding or thresholds than drover programmed');
  const extra = [dest('10.244.1.2'), dest('10.244.1.3'), dest('10.244.1.9', { weight: 0 })];
  t.is(realServerDrift(want, extra, none), 'real server 10.244.1.9:8080 of TCP/10.96.0.10:80 is in the kernel, and drover did not program it');
  const draining = new Map([['TCP/10.96.0.10:80 -> 10.244.1.9:8080', { vs: WEB, rs: { address: '10.244.1.9', port: 8080 }, since: 0 }]]);
  t.is(realServerDrift(want, extra, draining), undefined, 'a real server in graceful termination is drover\'s');
});

test('kube-ipvs0 addresses: a bound one gone, or one drover did not bind, or a bound one with another prefix', (t) => {
  const a = (...xs: string[]) => xs.map((x) => ({ address: x.split('/')[0]!, prefixLength: Number(x.split('/')[1] ?? 32) }));
  t.is(addressDrift(new Set(['10.96.0.10', '10.96.0.11']), a('10.96.0.11', '10.96.0.10')), undefined);
  t.is(addressDrift(new Set(['10.96.0.10', '10.96.0.11']), a('10.96.0.10')), 'ClusterIP 10.96.0.11 is gone from kube-ipvs0');
  t.is(addressDrift(new Set(['10.96.0.10']), a('10.96.0.10', '10.96.9.9')), 'address 10.96.9.9/32 on kube-ipvs0 was not bound by drover');
  t.is(addressDrift(new Set(['10.96.0.10']), a('10.96.0.10/24')), 'address 10.96.0.10/24 on kube-ipvs0 was not bound by drover');
});

test('the window of real-server checks wraps around and covers every virtual server', (t) => {
  t.deepEqual(checkWindow([1, 2, 3], 2, 5), { picked: [1, 2, 3], next: 0 });
  t.deepEqual(checkWindow([1, 2, 3, 4, 5], 0, 2), { picked: [1, 2], next: 2 });
  t.deepEqual(checkWindow([1, 2, 3, 4, 5], 4, 2), { picked: [5, 1], next: 1 });
  t.deepEqual(checkWindow([1, 2, 3], 7, 2), { picked: [2, 3], next: 0 }, 'a cursor past a list that shrank');
  t.is(realServerChecks(100), MIN_REAL_SERVER_CHECKS);
  t.is(realServerChecks(10_000), 500);
  const seen = new Set<number>();
  const items = Array.from({ length: 10_000 }, (_, i) => i);
  let cursor = 0;
  for (let i = 0; i < REAL_SERVER_ROUNDS; i++) {
    const w = checkWindow(items, cursor, realServerChecks(items.length));
    for (const x of w.picked) seen.add(x);
    cursor = w.next;
  }
  t.is(seen.size, items.length);
});

test('ipset list -t: the entry count, or an error naming the set', (t) => {
  const listing = 'Name: KUBE-CLUSTER-IP\nType: hash:ip,port\nRevision: 6\nHeader: family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1\nSize in memory: 400\nReferences: 1\nNumber of entries: 3\n';
  t.is(parseEntryCount(listing, 'KUBE-CLUSTER-IP'), 3);
  t.throws(() => parseEntryCount('Name: X\n', 'KUBE-CLUSTER-IP'), { message: /^ipset list -t KUBE-CLUSTER-IP: no "Number of entries" line/ });
});

test('the backend\'s check: clean after drover\'s own syncs; each change behind its back is named; a full sync clears it', async (t) => {
  const w = new World();
  const backend = w.backend();
  t.is(await backend.driftCheck(), 'nothing is known to be programmed');
  await backend.sync(base(), FULL);
  for (const table of ['mangle', 'nat', 'filter'] as const) t.true(await w.iptables.chainExists(table, 'KUBE-PROXY-CANARY'), table);
  t.is(await backend.driftCheck(), undefined);
  const reads = w.ipvs.log.length;
  await backend.sync(snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')])), { full: false, changed: new Set(['default/web:http']) });
  t.is(await backend.driftCheck(), undefined, "drover's own partial sync (a real server draining) is not drift");
  t.true(w.ipvs.log.length > reads);

  const cases: [string, () => Promise<void> | void, string | RegExp][] = [
    ['a real server deleted', () => w.ipvs.delDest({ protocol: 'UDP', address: '10.96.0.53', port: 53 }, { address: '10.244.2.2', port: 53 }), '1 of 1 real servers of UDP/10.96.0.53:53 are gone from the kernel'],
    ['a virtual server deleted', () => w.ipvs.delService({ protocol: 'TCP', address: '10.96.0.11', port: 80 }), '1 of 3 virtual servers drover programmed are gone from the kernel'],
    ['a virtual server added in the service CIDR', () => w.ipvs.newService({ protocol: 'TCP', address: '10.100.0.1', port: 443, scheduler: 'rr' }), 'virtual server TCP/10.100.0.1:443 is in the kernel, and drover did not program it'],
    ['an address added to kube-ipvs0', () => w.links.addByHand('kube-ipvs0', '10.96.7.7', 32), 'address 10.96.7.7/32 on kube-ipvs0 was not bound by drover'],
    ['ip_forward turned off', () => w.sysctls.write('net.ipv4.ip_forward', '0'), 'sysctl net.ipv4.ip_forward is 0, not 1'],
    ['a set entry added', () => w.ipset.setEntries('KUBE-CLUSTER-IP', 'hash:ip,port', ['10.96.0.10,tcp:80', '10.96.0.11,tcp:80', '10.96.0.53,udp:53', '10.96.9.9,tcp:1']), 'ipset KUBE-CLUSTER-IP has 4 entries, not the 3 drover wrote'],
    ['another program\'s nf_tables commit', () => w.iptables.commitElsewhere(), /^nf_tables generation \d+, not \d+ as drover left it: another program committed rules$/],
    ['the nat table flushed', () => w.iptables.flushTable('nat'), 'the KUBE-PROXY-CANARY chain is gone from nat'],
  ];
  for (const [what, change, reason] of cases) {
    await change();
    const found = await backend.driftCheck();
    if (typeof reason === 'string') t.is(found, reason, what);
    else t.regex(found ?? '', reason, what);
    await backend.sync(snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]), ...[...base().services.values()].filter((p) => p.key !== 'default/web:http')), FULL);
    t.is(await backend.driftCheck(), undefined, `${what}: repaired by a full sync`);
  }
});

test('the backend\'s check finds a real server deleted outside one window within the rounds', async (t) => {
  const w = new World();
  const backend = w.backend();
  const ports = Array.from({ length: 600 }, (_, i) => sp(`default/s${i}:http`, `10.96.${(i >> 8) + 1}.${i & 255}`, 80, [ep(`10.244.${(i >> 8) + 1}.${i & 255}:8080`)]));
  await backend.sync(snap(...ports), FULL);
  t.is(await backend.driftCheck(), undefined);
  await w.ipvs.delDest({ protocol: 'TCP', address: '10.96.2.44', port: 80 }, { address: '10.244.2.44', port: 8080 });
  const found: (string | undefined)[] = [];
  for (let i = 0; i < Math.ceil(600 / MIN_REAL_SERVER_CHECKS); i++) found.push(await backend.driftCheck());
  t.deepEqual(found.filter((f) => f !== undefined), ['1 of 1 real servers of TCP/10.96.2.44:80 are gone from the kernel']);
});

test('the backend\'s check leaves a source that was incomplete at the last full sync to the full read-back', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  const [web] = [...base().services.values()];
  await backend.sync(snap(web!), { full: true, changed: new Set<string>(), incomplete: true });
  t.is(await backend.driftCheck(), 'the last full sync kept virtual servers of an incomplete source, which only a full read-back checks');
  await backend.sync(base(), FULL);
  t.is(await backend.driftCheck(), undefined);
});

test('cleanup removes the canary chains too', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  const result = await backend.cleanup();
  t.is(result.removed.chain, 15, '12 of IPVS mode, 3 canaries');
  for (const table of ['mangle', 'nat', 'filter'] as const) t.false(await w.iptables.chainExists(table, 'KUBE-PROXY-CANARY'), table);
});

test('the backend\'s check opens a new IPVS client after a dump closed the old one', async (t) => {
  const w = new World();
  let reopened = 0;
  const backend = w.backend({ reopenIpvs: async () => (reopened++, w.ipvs) });
  await backend.sync(base(), FULL);
  w.ipvs.failNext('GET_SERVICE', new IpvsClientClosedError('IPVS request timed out after 30000 ms'));
  await t.throwsAsync(backend.driftCheck(), { instanceOf: IpvsClientClosedError });
  t.is(await backend.driftCheck(), undefined);
  t.is(reopened, 1);
});

test('cleanup removes the IPVS state before the canaries, so a busy xtables lock fails only that last step', async (t) => {
  const w = new World();
  const backend = w.backend();
  await backend.sync(base(), FULL);
  w.iptables.deleteChain = async () => {
    throw new Error('iptables: Another app is currently holding the xtables lock');
  };
  await t.throwsAsync(backend.cleanup(), { message: /xtables lock/ });
  t.deepEqual(w.ipvs.list(), []);
  t.is(w.links.addressesOf('kube-ipvs0'), undefined);
  t.is(w.ipset.entries('KUBE-CLUSTER-IP'), undefined);
});
