/** IPVS mode's desired state kept up to date one service port at a time (assemble.ts). */
import test from 'ava';
import { DesiredIndex, assembleDesired } from '../../src/modes/ipvs/assemble.ts';
import { desiredServicePort, type DesiredIpvsState, type DesiredServicePort } from '../../src/modes/ipvs/desired.ts';
import type { ServicePort } from '../../src/model/types.ts';
import { ep, sp } from '../support/snapshots.ts';

const d = (p: ServicePort): DesiredServicePort => desiredServicePort(p, { scheduler: 'rr' });

/** An independent statement of the rule: sort by ServicePortName, the first on each virtual server wins, winners contribute. */
function oracle(ports: Iterable<DesiredServicePort>): DesiredIpvsState {
  const sorted = [...ports].sort((x, y) => (x.server.servicePort < y.server.servicePort ? -1 : 1));
  const servers = new Map<string, DesiredServicePort>();
  const conflicts: string[] = [];
  for (const p of sorted) {
    if (servers.has(p.server.key)) conflicts.push(p.server.servicePort);
    else servers.set(p.server.key, p);
  }
  const winners = [...servers.values()];
  const toInt = (ip: string) => ip.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
  return {
    virtualServers: new Map([...servers].filter(([, p]) => !p.withheld).sort(([x], [y]) => (x < y ? -1 : 1)).map(([k, p]) => [k, p.server])),
    withheld: new Map([...servers].filter(([, p]) => p.withheld).sort(([x], [y]) => (x < y ? -1 : 1)).map(([k, p]) => [k, p.server])),
    addresses: [...new Set(winners.map((p) => p.server.vs.address))].sort((x, y) => toInt(x) - toInt(y)),
    clusterIPSet: new Set(winners.map((p) => p.clusterIPEntry)),
    loopBackSet: new Set(winners.flatMap((p) => p.loopBackEntries)),
    // Not compared (plain leaves it out): these service ports have no external frontend.
    sets: {} as DesiredIpvsState['sets'],
    conflicts,
  };
}

/** The state in plain, comparable form. */
function plain(s: DesiredIpvsState) {
  return {
    virtualServers: [...s.virtualServers].map(([key, v]) => [key, v.servicePort, [...v.reals.keys()]]),
    withheld: [...s.withheld].map(([key, v]) => [key, v.servicePort]),
    addresses: s.addresses,
    clusterIPSet: [...s.clusterIPSet].sort(),
    loopBackSet: [...s.loopBackSet].sort(),
    conflicts: s.conflicts,
  };
}

test('update returns exactly what became wanted and what stopped; shared ClusterIPs and hairpin entries are counted', (t) => {
  // Two service ports on one ClusterIP, both targeting 10.244.1.2:8080.
  const http = sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080'), ep('10.244.1.3:8080')]);
  const alt = sp('default/web:alt', '10.96.0.10', 8080, [ep('10.244.1.2:8080')]);
  const index = DesiredIndex.of([d(http), d(alt)]);

  const removed = index.update(new Map([['default/web:http', undefined]]));
  t.deepEqual(removed.clusterIP, { add: [], del: ['10.96.0.10,tcp:80'] });
  t.deepEqual(removed.loopBack, { add: [], del: ['10.244.1.3,tcp:8080,10.244.1.3'] }, '10.244.1.2 is still wanted by default/web:alt');
  t.deepEqual(removed.addresses, { add: [], del: [] }, 'the ClusterIP is still wanted by default/web:alt');
  t.deepEqual([...removed.virtualServers], [['TCP/10.96.0.10:80', { vs: { protocol: 'TCP', address: '10.96.0.10', port: 80, scheduler: 'rr', netmask: 0xffffffff }, desired: undefined }]]);

  const gone = index.update(new Map([['default/web:alt', undefined]]));
  t.deepEqual(gone.loopBack, { add: [], del: ['10.244.1.2,tcp:8080,10.244.1.2'] });
  t.deepEqual(gone.addresses, { add: [], del: ['10.96.0.10'] });
  t.is(index.size, 0);
  t.deepEqual(plain(index.state()), { virtualServers: [], withheld: [], addresses: [], clusterIPSet: [], loopBackSet: [], conflicts: [] });

  const back = index.update(new Map([['default/web:alt', d(alt)]]));
  t.deepEqual(back.addresses, { add: ['10.96.0.10'], del: [] });
  t.deepEqual(back.clusterIP, { add: ['10.96.0.10,tcp:8080'], del: [] });
});

test('two service ports on one ClusterIP:port: the first by name wins; when it goes, the other takes over with its own real servers', (t) => {
  const a = sp('default/a:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]);
  const b = sp('default/b:http', '10.96.0.10', 80, [ep('10.244.9.9:80')]);
  const index = DesiredIndex.of([d(b), d(a)]);
  t.deepEqual(index.state().conflicts, ['default/b:http']);
  t.is(index.state().virtualServers.get('TCP/10.96.0.10:80')!.servicePort, 'default/a:http');

  const delta = index.update(new Map([['default/a:http', undefined]]));
  t.deepEqual(delta.conflicts, []);
  t.is(delta.virtualServers.get('TCP/10.96.0.10:80')!.desired!.servicePort, 'default/b:http');
  t.deepEqual(delta.loopBack, { add: ['10.244.9.9,tcp:80,10.244.9.9'], del: ['10.244.1.2,tcp:8080,10.244.1.2'] });
  t.deepEqual(delta.clusterIP, { add: [], del: [] });
  t.deepEqual(delta.addresses, { add: [], del: [] });

  const again = index.update(new Map([['default/a:http', d(a)]]));
  t.deepEqual(again.conflicts, ['default/b:http'], 'the changed port wins again; the unchanged one it pushes out is named');
  t.is(again.virtualServers.get('TCP/10.96.0.10:80')!.desired!.servicePort, 'default/a:http');
  t.deepEqual(index.state().conflicts, ['default/b:http']);
});

test('assembleDesired is the index built at once', (t) => {
  const ports = [
    d(sp('default/b:http', '10.96.0.10', 80, [ep('10.244.9.9:80')])),
    d(sp('default/a:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')])),
    d(sp('default/c:http', '10.96.0.9', 80, [])),
  ];
  t.deepEqual(plain(assembleDesired(ports)), plain(oracle(ports)));
});

test('after any sequence of updates the index equals one built from scratch', (t) => {
  // A small deterministic generator: 300 updates over 40 service ports on 6 ClusterIPs and 8 endpoint addresses, so ClusterIPs, ports and endpoints collide.
  let seed = 7;
  const rand = (n: number): number => {
    // mulberry32
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) % n;
  };
  const names = Array.from({ length: 40 }, (_, i) => `ns/s${i}:p`);
  const make = (name: string): ServicePort => {
    const eps = Array.from({ length: rand(4) }, () => ep(`10.244.0.${rand(8) + 1}:${8080 + rand(2)}`));
    const unique = [...new Map(eps.map((e) => [`${e.ip}:${e.port}`, e])).values()];
    // internalTrafficPolicy Local without a node: no endpoint is local, so a port with endpoints is withheld (desired.ts).
    return sp(name, `10.96.0.${rand(6) + 1}`, 80 + rand(3), unique, { ...(rand(5) === 0 ? { protocol: 'UDP' as const } : {}), ...(rand(4) === 0 ? { internalTrafficPolicy: 'Local' as const } : {}) });
  };
  const current = new Map<string, DesiredServicePort>();
  const index = DesiredIndex.of([]);
  let takeovers = 0;
  let withheld = 0;
  for (let step = 0; step < 300; step++) {
    const changes = new Map<string, DesiredServicePort | undefined>();
    for (let k = rand(3) + 1; k > 0; k--) {
      const name = names[rand(names.length)]!;
      const next = rand(4) === 0 ? undefined : d(make(name));
      changes.set(name, next);
    }
    const before = oracle(current.values());
    const delta = index.update(changes);
    for (const [name, next] of changes) {
      if (next) current.set(name, next);
      else current.delete(name);
    }
    const after = oracle(current.values());
    t.deepEqual(plain(index.state()), plain(after), `step ${step}`);
    withheld += after.withheld.size;
    t.is(index.serverCount, after.virtualServers.size, `step ${step} server count`);
    t.deepEqual([...index.serverKeys()].sort(), [...after.virtualServers.keys()], `step ${step} server keys`);
    for (const [key, v] of before.virtualServers) {
      const now = after.virtualServers.get(key);
      if (now && now.servicePort !== v.servicePort && !changes.has(now.servicePort)) takeovers++;
    }
    // The delta is exactly the difference between the two whole states.
    const diff = (was: Iterable<string>, is: Iterable<string>) => {
      const w = new Set(was);
      const i = new Set(is);
      return { add: [...i].filter((x) => !w.has(x)).sort(), del: [...w].filter((x) => !i.has(x)).sort() };
    };
    t.deepEqual({ add: [...delta.clusterIP.add].sort(), del: [...delta.clusterIP.del].sort() }, diff(before.clusterIPSet, after.clusterIPSet), `step ${step} KUBE-CLUSTER-IP`);
    t.deepEqual({ add: [...delta.loopBack.add].sort(), del: [...delta.loopBack.del].sort() }, diff(before.loopBackSet, after.loopBackSet), `step ${step} KUBE-LOOP-BACK`);
    t.deepEqual({ add: [...delta.addresses.add].sort(), del: [...delta.addresses.del].sort() }, diff(before.addresses, after.addresses), `step ${step} kube-ipvs0`);
    for (const [key, { desired }] of delta.virtualServers) t.is(desired, after.virtualServers.get(key), `step ${step} ${key}`);
    const inScope = [...current.values()].filter((p) => delta.virtualServers.has(p.server.key)).map((p) => p.server.servicePort);
    t.deepEqual(delta.conflicts, after.conflicts.filter((name) => inScope.includes(name)).sort(), `step ${step} conflicts`);
    t.deepEqual(index.servingEndpoints, [...current.values()].reduce((n, p) => n + p.server.reals.size, 0), `step ${step} serving endpoints`);
    for (const key of new Set([...before.virtualServers.keys(), ...after.virtualServers.keys()])) {
      if (before.virtualServers.get(key) !== after.virtualServers.get(key)) t.true(delta.virtualServers.has(key), `step ${step}: ${key} changed outside the delta`);
    }
  }
  t.true(takeovers > 10, `only ${takeovers} takeovers by an unchanged conflicting service port: the generator must make more collisions`);
  t.true(withheld > 100, `only ${withheld} withheld virtual servers over all steps: the generator must make more`);
});

test("internalTrafficPolicy Local: the virtual server's real servers are this node's endpoints; none when only other nodes have some", (t) => {
  const port = sp('ns/a:http', '10.96.0.12', 80, [ep('10.244.1.2:8080', { nodeName: 'n1' }), ep('10.244.1.3:8080', { nodeName: 'n2' })], { internalTrafficPolicy: 'Local' });
  const on = (name: string) => desiredServicePort(port, { scheduler: 'rr' }, { name, addresses: [] });
  t.deepEqual([...on('n1').server.reals.values()].map((r) => `${r.address}:${r.port}`), ['10.244.1.2:8080']);
  t.deepEqual(on('n1').loopBackEntries, ['10.244.1.2,tcp:8080,10.244.1.2']);
  t.is(on('n3').server.reals.size, 0);
  t.deepEqual([...d(port).server.reals.values()].map((r) => r.address), [], 'no node: no endpoint is local');
});
