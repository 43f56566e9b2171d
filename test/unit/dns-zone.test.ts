import test from 'ava';
import { Zone } from '../../src/dns/zone.ts';
import { ServiceDnsView } from '../../src/dns/view.ts';
import { externalNameRecords, headlessRecords, reverseName, servicePortRecords } from '../../src/dns/records.ts';
import { dualSnap, ep, snap, sp } from '../support/snapshots.ts';

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

test('a headless Service: A per ready endpoint, hostname records, SRV to them, PTR for endpoints with a hostname; NXDOMAIN with none ready', (t) => {
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  const svc = {
    namespace: 'default',
    name: 'db',
    ports: [{ name: 'pg', protocol: 'TCP' as const, port: 5432 }, { name: '', protocol: 'TCP' as const, port: 9 }],
    endpoints: [
      { ip: '10.244.1.2', ready: true, hostname: 'db-0' },
      { ip: '10.244.1.3', ready: true },
      { ip: '10.244.1.4', ready: false, hostname: 'db-2' },
    ],
  };
  zone.set('headless default/db', headlessRecords(svc, zone.domain));
  t.deepEqual(zone.answer('db.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.244.1.2', '10.244.1.3']);
  t.deepEqual(zone.answer('db-0.db.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.244.1.2']);
  t.deepEqual(zone.answer('10-244-1-3.db.default.svc.cluster.local', 'A')?.answers.map((a) => a.data), ['10.244.1.3']);
  t.deepEqual(zone.answer('db-2.db.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('_pg._tcp.db.default.svc.cluster.local', 'SRV')?.answers.map((a) => a.data), [
    { priority: 0, weight: 50, port: 5432, target: 'db-0.db.default.svc.cluster.local' },
    { priority: 0, weight: 50, port: 5432, target: '10-244-1-3.db.default.svc.cluster.local' },
  ]);
  t.deepEqual(zone.answer('2.1.244.10.in-addr.arpa', 'PTR')?.answers.map((a) => a.data), ['db-0.db.default.svc.cluster.local']);
  t.is(zone.answer('3.1.244.10.in-addr.arpa', 'PTR'), undefined);
  zone.set('headless default/db', headlessRecords({ ...svc, endpoints: svc.endpoints.map((e) => ({ ...e, ready: false })) }, zone.domain));
  t.deepEqual(zone.answer('db.default.svc.cluster.local', 'A'), NXDOMAIN);
  t.deepEqual(zone.answer('default.svc.cluster.local', 'A'), NXDOMAIN);
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
