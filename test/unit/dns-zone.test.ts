import test from 'ava';
import { Zone } from '../../src/dns/zone.ts';
import { ServiceDnsView } from '../../src/dns/view.ts';
import { externalNameRecords, headlessRecords, reverseName, servicePortRecords } from '../../src/dns/records.ts';
import { dualSnap, ep, snap, sp } from '../support/snapshots.ts';
import type { DnsOnlyService, HeadlessService } from '../../src/model/types.ts';

const SOA = {
  name: 'cluster.local',
  type: 'SOA',
  class: 'IN',
  ttl: 5,
  data: { mname: 'ns.dns.cluster.local', rname: 'hostmaster.cluster.local', serial: 1, refresh: 7200, retry: 1800, expire: 86400, minimum: 5 },
};
const NXDOMAIN = { rcode: 'NXDOMAIN', answers: [], authorities: [SOA] };
const NODATA = { rcode: 'NOERROR', answers: [], authorities: [SOA] };

/** A zone fed with web (two named ports) and db (one unnamed port) through the view. */
function zoneWithWeb(ttl = 5): Zone {
  const zone = new Zone({ domain: 'cluster.local', ttl });
  new ServiceDnsView(zone).apply(
    snap(
      sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]),
      sp('default/web:dns', '10.96.0.10', 53, [], { protocol: 'UDP' }),
      sp('shop/db', '10.96.0.20', 5432, []),
    ),
  );
  return zone;
}

test('a ClusterIP Service: A for its name, SRV per named port, PTR for the ClusterIP', (t) => {
  const zone = zoneWithWeb();
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'A'), {
    rcode: 'NOERROR',
    answers: [{ name: 'web.default.svc.cluster.local', type: 'A', class: 'IN', ttl: 5, data: '10.96.0.10' }],
    authorities: [],
  });
  t.deepEqual(zone.answer('_http._tcp.web.default.svc.cluster.local.', 'SRV')?.answers, [
    { name: '_http._tcp.web.default.svc.cluster.local', type: 'SRV', class: 'IN', ttl: 5, data: { priority: 0, weight: 100, port: 80, target: 'web.default.svc.cluster.local' } },
  ]);
  t.deepEqual(zone.answer('_dns._udp.web.default.svc.cluster.local', 'SRV')?.answers.map((a) => a.data), [{ priority: 0, weight: 100, port: 53, target: 'web.default.svc.cluster.local' }]);
  t.deepEqual(zone.answer('10.0.96.10.in-addr.arpa', 'PTR')?.answers, [{ name: '10.0.96.10.in-addr.arpa', type: 'PTR', class: 'IN', ttl: 5, data: 'web.default.svc.cluster.local' }]);
  t.deepEqual(zone.answer('db.shop.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.96.0.20']);
});

test('names compare case-insensitively, and the answer keeps the case asked', (t) => {
  const zone = zoneWithWeb();
  t.deepEqual(zone.answer('WeB.DeFault.SVC.Cluster.Local.', 'A')?.answers, [{ name: 'WeB.DeFault.SVC.Cluster.Local', type: 'A', class: 'IN', ttl: 5, data: '10.96.0.10' }]);
});

test('NODATA for a name that exists without the type or only has names below it, NXDOMAIN otherwise, both with the SOA', (t) => {
  const zone = zoneWithWeb();
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'AAAA'), NODATA);
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'MX'), NODATA);
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'UNKNOWN_65280'), NODATA);
  t.deepEqual(zone.answer('default.svc.cluster.local', 'A'), NODATA);
  t.deepEqual(zone.answer('svc.cluster.local', 'A'), NODATA);
  t.deepEqual(zone.answer('_tcp.web.default.svc.cluster.local', 'SRV'), NODATA);
  t.deepEqual(zone.answer('cluster.local', 'A'), NODATA);
  t.deepEqual(zone.answer('nope.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('web.other.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('web.default.svc.cluster.local.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('_https._tcp.web.default.svc.cluster.local', 'SRV'), NXDOMAIN);
});

test('the apex SOA, dns-version TXT, ANY, and names outside the zone', (t) => {
  const zone = zoneWithWeb();
  t.deepEqual(zone.answer('cluster.local', 'SOA'), { rcode: 'NOERROR', answers: [SOA], authorities: [] });
  t.deepEqual(zone.answer('dns-version.cluster.local', 'TXT')?.answers, [{ name: 'dns-version.cluster.local', type: 'TXT', class: 'IN', ttl: 5, data: '1.1.0' }]);
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'ANY')?.answers.map((a) => a.type), ['A']);
  t.is(zone.answer('example.com', 'A'), undefined);
  t.is(zone.answer('local', 'A'), undefined);
  t.is(zone.answer('xcluster.local', 'A'), undefined);
  // A reverse name the zone holds no PTR for is not the zone's.
  t.is(zone.answer('11.0.96.10.in-addr.arpa', 'PTR'), undefined);
  t.deepEqual(zone.answer('10.0.96.10.in-addr.arpa', 'A'), NODATA);
});

test('the TTL is the zone setting, in answers and in the SOA', (t) => {
  const zone = zoneWithWeb(30);
  t.is(zone.answer('web.default.svc.cluster.local', 'A')?.answers[0]?.ttl, 30);
  const soa = zone.answer('nope.default.svc.cluster.local', 'A')!.authorities[0]!;
  t.is(soa.ttl, 30);
  t.is((soa.data as { minimum: number }).minimum, 30);
  t.throws(() => new Zone({ domain: 'cluster.local', ttl: -1 }), { message: /DNS TTL -1/ });
  t.throws(() => new Zone({ domain: 'bad..domain', ttl: 5 }), { message: /cluster domain "bad..domain"/ });
});

test('dual-stack: AAAA from the IPv6 view, PTR in ip6.arpa', (t) => {
  const zone = new Zone({ domain: 'Cluster.Local.', ttl: 5 });
  new ServiceDnsView(zone).apply(dualSnap([sp('default/web:http', '10.96.0.10', 80, [])], [sp('default/web:http', 'fd00:96::a', 80, [])]));
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'AAAA')?.answers.map((a) => a.data), ['fd00:96::a']);
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.96.0.10']);
  const ptr = reverseName('fd00:96::a');
  t.is(ptr, 'a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.f.ip6.arpa');
  t.deepEqual(zone.answer(ptr.toUpperCase(), 'PTR')?.answers.map((a) => a.data), ['web.default.svc.cluster.local']);
});

/** A headless Service: db-0 (hostname) and 10.244.1.3 (none) ready, db-2 not ready; a named and an unnamed port. */
const DB: HeadlessService = {
  kind: 'headless',
  namespace: 'default',
  name: 'db',
  groups: [
    {
      ports: [{ name: 'pg', protocol: 'TCP', port: 5432 }, { name: '', protocol: 'TCP', port: 9 }],
      addresses: [
        { ip: '10.244.1.2', ready: true },
        { ip: '10.244.1.3', ready: true },
        { ip: '10.244.1.4', ready: false },
      ],
      hostnames: new Map([['10.244.1.2', 'db-0'], ['10.244.1.4', 'db-2']]),
    },
  ],
};

test('a headless Service: A per ready endpoint, per-endpoint names, SRV to them, PTR for each ready endpoint; NXDOMAIN with none ready', (t) => {
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  zone.set('dns default/db', headlessRecords(DB, zone.domain));
  t.deepEqual(zone.answer('db.default.svc.cluster.local', 'A')?.answers, [
    { name: 'db.default.svc.cluster.local', type: 'A', class: 'IN', ttl: 5, data: '10.244.1.2' },
    { name: 'db.default.svc.cluster.local', type: 'A', class: 'IN', ttl: 5, data: '10.244.1.3' },
  ]);
  t.deepEqual(zone.answer('db-0.db.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.244.1.2']);
  t.deepEqual(zone.answer('10-244-1-3.db.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.244.1.3']);
  t.deepEqual(zone.answer('db-2.db.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('10-244-1-2.db.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('_pg._tcp.db.default.svc.cluster.local', 'SRV')?.answers.map((a) => a.data), [
    { priority: 0, weight: 50, port: 5432, target: 'db-0.db.default.svc.cluster.local' },
    { priority: 0, weight: 50, port: 5432, target: '10-244-1-3.db.default.svc.cluster.local' },
  ]);
  t.deepEqual(zone.answer('2.1.244.10.in-addr.arpa', 'PTR')?.answers.map((a) => a.data), ['db-0.db.default.svc.cluster.local']);
  t.deepEqual(zone.answer('3.1.244.10.in-addr.arpa', 'PTR')?.answers.map((a) => a.data), ['10-244-1-3.db.default.svc.cluster.local']);
  t.is(zone.answer('4.1.244.10.in-addr.arpa', 'PTR'), undefined);
  const none = { ...DB, groups: DB.groups.map((g) => ({ ...g, addresses: g.addresses.map((a) => ({ ...a, ready: false })) })) };
  t.deepEqual(headlessRecords(none, zone.domain), []);
  zone.set('dns default/db', headlessRecords(none, zone.domain));
  t.deepEqual(zone.answer('db.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('default.svc.cluster.local', 'A'), NXDOMAIN);
});

test('a dual-stack headless Service: a hostname names both families, each slice its own ports; IPv6 addresses named with dashes', (t) => {
  const svc: HeadlessService = {
    kind: 'headless',
    namespace: 'shop',
    name: 'kv',
    groups: [
      { ports: [{ name: 'kv', protocol: 'UDP', port: 7000 }], addresses: [{ ip: '10.244.2.5', ready: true }], hostnames: new Map([['10.244.2.5', 'kv-0']]) },
      {
        ports: [{ name: 'kv', protocol: 'UDP', port: 7000 }],
        addresses: [{ ip: 'fd00:10::5', ready: true }, { ip: 'fd00:10::6', ready: true }, { ip: '::7', ready: true }],
        hostnames: new Map([['fd00:10::5', 'kv-0']]),
      },
    ],
  };
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  zone.set('dns shop/kv', headlessRecords(svc, zone.domain));
  t.deepEqual(zone.answer('kv-0.kv.shop.svc.cluster.local', 'ANY')?.answers.map((a) => [a.type, a.data]), [['A', '10.244.2.5'], ['AAAA', 'fd00:10::5']]);
  t.deepEqual(zone.answer('kv.shop.svc.cluster.local', 'AAAA')?.answers.map((a) => a.data), ['fd00:10::5', 'fd00:10::6', '::7']);
  t.deepEqual(zone.answer('fd00-10--6.kv.shop.svc.cluster.local', 'AAAA')?.answers.map((a) => a.data), ['fd00:10::6']);
  // "::7" with dashes is not a DNS label: the address is only at the Service's name.
  t.deepEqual(zone.answer('_kv._udp.kv.shop.svc.cluster.local', 'SRV')?.answers.map((a) => a.data), [
    { priority: 0, weight: 50, port: 7000, target: 'kv-0.kv.shop.svc.cluster.local' },
    { priority: 0, weight: 50, port: 7000, target: 'fd00-10--6.kv.shop.svc.cluster.local' },
  ]);
  t.deepEqual(zone.answer(reverseName('fd00:10::6'), 'PTR')?.answers.map((a) => a.data), ['fd00-10--6.kv.shop.svc.cluster.local']);
});

test('a name longer than 253 characters gets no record', (t) => {
  const zone = `${'z'.repeat(60)}.${'y'.repeat(60)}.${'x'.repeat(60)}`;
  const long = 'l'.repeat(63);
  t.deepEqual(servicePortRecords(sp(`${long}/${long}`, '10.96.0.10', 80, []), zone), []);
  const svc: HeadlessService = { kind: 'headless', namespace: 'ns', name: long, groups: [{ ports: [], addresses: [{ ip: '10.244.1.2', ready: true }], hostnames: new Map([['10.244.1.2', long]]) }] };
  // The Service's own name just fits (253 characters); the per-endpoint name (317) does not.
  t.deepEqual(headlessRecords(svc, zone).map((r) => [r.name.length, r.type]), [[253, 'A']]);
  t.deepEqual(externalNameRecords('ns', long, `${long}.${long}.${long}.${long}`, 'cluster.local'), []);
});

test('an ExternalName Service: a CNAME, followed inside the zone', (t) => {
  const zone = zoneWithWeb();
  zone.set('x default/search', externalNameRecords('default', 'search', 'Search.Example.COM.', zone.domain));
  zone.set('x default/alias', externalNameRecords('default', 'alias', 'web.default.svc.cluster.local', zone.domain));
  const cname = { name: 'search.default.svc.cluster.local', type: 'CNAME', class: 'IN', ttl: 5, data: 'search.example.com' };
  t.deepEqual(zone.answer('search.default.svc.cluster.local', 'A'), { rcode: 'NOERROR', answers: [cname], authorities: [] });
  t.deepEqual(zone.answer('search.default.svc.cluster.local', 'CNAME')?.answers, [cname]);
  t.deepEqual(zone.answer('alias.default.svc.cluster.local', 'A')?.answers.map((a) => [a.type, a.data]), [['CNAME', 'web.default.svc.cluster.local'], ['A', '10.96.0.10']]);
  t.deepEqual(externalNameRecords('default', 'bad', 'not a name', zone.domain), []);
});

test('records of a Service whose name is not a DNS label are not made', (t) => {
  t.deepEqual(servicePortRecords(sp('default/Web:http', '10.96.0.10', 80, []), 'cluster.local'), []);
  t.deepEqual(servicePortRecords(sp('default/web:Bad_Port', '10.96.0.10', 80, []), 'cluster.local').map((r) => r.type), ['A', 'PTR']);
});

test('the view replaces the records of the changed service ports only, and removes the deleted ones', (t) => {
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  const view = new ServiceDnsView(zone);
  const web = sp('default/web:http', '10.96.0.10', 80, []);
  const db = sp('shop/db', '10.96.0.20', 5432, []);
  t.is(view.apply(snap(web, db)), 2);
  // A full sync with the same objects touches nothing.
  t.is(view.apply(snap(web, db)), 0);
  // A partial sync: only the changed key is looked at, even though db's object is new.
  const moved = sp('default/web:http', '10.96.0.11', 80, []);
  t.is(view.apply(snap(moved, sp('shop/db', '10.96.0.20', 5432, [])), new Set(['default/web:http'])), 1);
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.96.0.11']);
  t.is(zone.answer('10.0.96.10.in-addr.arpa', 'PTR'), undefined);
  // Deleted at a partial sync, and at a full one.
  t.is(view.apply(snap(db), new Set(['default/web:http'])), 1);
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.is(view.apply(snap()), 1);
  t.deepEqual(zone.answer('default.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('svc.cluster.local', 'A'), NXDOMAIN);
  t.is(zone.size, 0);
});

test('two ports of one Service share its A and PTR records; the name stays while one port is left', (t) => {
  const zone = zoneWithWeb();
  const view = new ServiceDnsView(zone);
  view.apply(snap(sp('default/web:http', '10.96.0.10', 80, []), sp('default/web:dns', '10.96.0.10', 53, [], { protocol: 'UDP' })));
  zone.delete('4 default/web:http');
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.96.0.10']);
  t.deepEqual(zone.answer('_http._tcp.web.default.svc.cluster.local', 'SRV'), NXDOMAIN);
});

test('while the source is read in part, the names of the service ports it does not list are kept, as their rules are', (t) => {
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  const view = new ServiceDnsView(zone);
  const web = sp('default/web:http', '10.96.0.10', 80, []);
  const db = sp('shop/db', '10.96.0.20', 5432, []);
  view.apply(snap(web, db));
  t.is(view.apply(snap(web), undefined, true), 0);
  t.is(view.apply(snap(web), new Set(['shop/db']), true), 0);
  t.deepEqual(zone.answer('db.shop.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.96.0.20']);
  // Whole again: it goes.
  t.is(view.apply(snap(web)), 1);
  t.is(zone.answer('db.shop.svc.cluster.local', 'A')?.rcode, 'NXDOMAIN');
});

test('the view gives names to the Services only DNS serves, replaces a changed one by identity, and removes a deleted one', (t) => {
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  const view = new ServiceDnsView(zone);
  const web = sp('default/web:http', '10.96.0.10', 80, []);
  const alias: DnsOnlyService = { kind: 'externalName', namespace: 'default', name: 'alias', externalName: 'web.default.svc.cluster.local' };
  const withDns = (...dns: DnsOnlyService[]) => ({ ...snap(web), dnsOnly: new Map(dns.map((d) => [`${d.namespace}/${d.name}`, d])) });
  t.is(view.apply(withDns(DB, alias)), 3);
  t.deepEqual(zone.answer('alias.default.svc.cluster.local', 'A')?.answers.map((a) => [a.type, a.data]), [['CNAME', 'web.default.svc.cluster.local'], ['A', '10.96.0.10']]);
  t.deepEqual(zone.answer('db.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.244.1.2', '10.244.1.3']);
  // A partial sync that changed no service port still brings the DNS-only Services: the same objects cost nothing.
  t.is(view.apply(withDns(DB, alias), new Set()), 0);
  const fewer: HeadlessService = { ...DB, groups: [{ ...DB.groups[0]!, addresses: [{ ip: '10.244.1.3', ready: true }] }] };
  t.is(view.apply(withDns(fewer, alias), new Set()), 1);
  t.deepEqual(zone.answer('db.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.244.1.3']);
  t.is(zone.answer('2.1.244.10.in-addr.arpa', 'PTR'), undefined);
  // The source read in part keeps a missing one; whole again, it goes.
  t.is(view.apply(withDns(fewer), undefined, true), 0);
  t.is(zone.answer('alias.default.svc.cluster.local', 'CNAME')?.answers.length, 1);
  t.is(view.apply(withDns(fewer)), 1);
  t.deepEqual(zone.answer('alias.default.svc.cluster.local', 'CNAME'), NXDOMAIN);
  t.is(view.apply(snap(web), new Set()), 1);
  t.deepEqual(zone.answer('db.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.is(zone.size, 1);
});

test('an endpoint change leaves the records, and the zone\'s generation, as they are; a port change replaces them', (t) => {
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  const view = new ServiceDnsView(zone);
  t.is(view.apply(snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]))), 1);
  const generation = zone.generation;
  t.is(view.apply(snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.3:8080')])), new Set(['default/web:http'])), 0);
  t.is(zone.generation, generation, 'no record replaced');
  t.deepEqual(zone.answer('web.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.96.0.10']);
  t.is(view.apply(snap(sp('default/web:http', '10.96.0.10', 81, [ep('10.244.1.3:8080')])), new Set(['default/web:http'])), 1);
  t.not(zone.generation, generation);
  t.deepEqual(zone.answer('_http._tcp.web.default.svc.cluster.local', 'SRV')?.answers.map((a) => (a.data as { port: number }).port), [81]);
});
