import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { synthSnapshot } from '../../src/bench/synth.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const render = { clusterCIDR: '10.0.0.0/8', masqueradeAll: false };
const FULL = { full: true, changed: new Set<string>() };
const partial = (...keys: string[]) => ({ full: false, changed: new Set(keys) });

function setup(opts: { maxLinesPerTransaction?: number } = {}) {
  const fake = new FakeIptables();
  const make = () => new IptablesBackend({ exec: fake, render, logger: silentLogger(), ...opts });
  return { fake, backend: make(), make };
}

const svc1 = (eps: string[]) => sp('ns1/svc1:p80', '172.30.0.41', 80, eps.map((e) => ep(e)));
const svc2 = (eps: string[]) => sp('ns2/svc2:p8080', '172.30.0.42', 8080, eps.map((e) => ep(e)));

test('a partial sync after one endpoint change writes only that service port', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80', '10.180.0.2:80']), svc2(['10.180.0.9:8080'])), FULL);
  const result = await backend.sync(snap(svc1(['10.180.0.1:80']), svc2(['10.180.0.9:8080'])), partial('ns1/svc1:p80'));
  t.is(
    fake.restores.at(-1),
    `*nat
:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
:KUBE-SEP-LXVODXWDISEETFEF - [0:0]
-A KUBE-SVC-XPGD46QRK7WJZT7O ! -s 10.0.0.0/8 -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
-X KUBE-SEP-LXVODXWDISEETFEF
COMMIT
`,
  );
  t.like(result, { full: false, written: { chain: 1, rule: 2 }, deleted: { chain: 1, rule: 0 }, transactions: 1 });
  t.false(fake.dump('nat').includes('KUBE-SEP-LXVODXWDISEETFEF'));
});

test('a service losing all endpoints: jump deleted, REJECT added, chains deleted, in one restore (nat first)', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  await backend.sync(snap(svc1([])), partial('ns1/svc1:p80'));
  t.is(
    fake.restores.at(-1),
    `*nat
:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
-D KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
-X KUBE-SVC-XPGD46QRK7WJZT7O
-X KUBE-SEP-SXIVWICOYRO3J4NJ
COMMIT
*filter
-A KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
COMMIT
`,
  );
  t.deepEqual(fake.chain('nat', 'KUBE-SERVICES'), []);
});

test('a removed service port leaves no chain or rule behind', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80']), svc2([])), FULL);
  const before = fake.dump('nat');
  await backend.sync(snap(svc1(['10.180.0.1:80'])), partial('ns2/svc2:p8080'));
  t.is(fake.dump('nat'), before);
  t.deepEqual(fake.chain('filter', 'KUBE-SERVICES'), []);
  await backend.sync(snap(), partial('ns1/svc1:p80'));
  t.false(/KUBE-S(VC|EP)-/.test(fake.dump('nat')));
});

test('a restarted drover adopts the live rules without writing anything', async (t) => {
  const { fake, backend, make } = setup();
  const s = snap(svc1(['10.180.0.1:80', '10.180.0.2:80', '10.180.0.3:80']), svc2([]));
  await backend.sync(s, FULL);
  const restores = fake.restores.length;
  const result = await make().sync(s, FULL);
  t.is(fake.restores.length, restores, 'no restore at all');
  t.like(result, { full: true, written: { chain: 0, rule: 0 }, bytes: 0, transactions: 0 });
});

test('a full sync repairs drift: a deleted chain, a foreign rule in an owned chain, a stale chain', async (t) => {
  const { fake, backend } = setup();
  const s = snap(svc1(['10.180.0.1:80', '10.180.0.2:80']));
  await backend.sync(s, FULL);
  const good = fake.dump('nat');
  fake.chain('nat', 'KUBE-SEP-SXIVWICOYRO3J4NJ')!.length = 0;
  fake.chain('nat', 'KUBE-SERVICES')!.push('-d 10.9.9.9/32 -j KUBE-MARK-MASQ');
  fake.setChain('nat', 'KUBE-SVC-AAAAAAAAAAAAAAAA', ['-j KUBE-MARK-MASQ']);
  fake.setChain('nat', 'DOCKER', ['-j RETURN']);
  const result = await backend.sync(s, FULL);
  t.like(result, { written: { chain: 1 }, deleted: { chain: 1, rule: 1 } });
  const withoutDocker = fake
    .dump('nat')
    .split('\n')
    .filter((l) => !l.includes('DOCKER'))
    .join('\n');
  t.is(withoutDocker, good);
  t.deepEqual(fake.chain('nat', 'DOCKER'), ['-j RETURN'], 'a chain drover does not own is left alone');
});

test('missing hook jumps are put back at the top of their chains', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(), FULL);
  fake.chain('nat', 'PREROUTING')!.length = 0;
  fake.chain('nat', 'PREROUTING')!.push('-j DOCKER-ISH');
  await backend.sync(snap(), FULL);
  t.deepEqual(fake.chain('nat', 'PREROUTING'), [
    '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
    '-j DOCKER-ISH',
  ]);
});

test('after a failed restore the next sync is a full one and converges', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  fake.failNextRestore(new Error('boom'));
  await t.throwsAsync(backend.sync(snap(svc1(['10.180.0.2:80'])), partial('ns1/svc1:p80')), { message: 'boom' });
  const result = await backend.sync(snap(svc1(['10.180.0.2:80'])), partial('ns1/svc1:p80'));
  t.true(result.full);
  t.true(fake.dump('nat').includes('--to-destination 10.180.0.2:80'));
  t.false(fake.dump('nat').includes('10.180.0.1'));
});

test('a partial sync on a chain deleted behind drover fails, and the full retry repairs it', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80']), svc2(['10.180.0.9:8080'])), FULL);
  fake.chain('nat', 'KUBE-SERVICES')!.length = 0; // someone flushed KUBE-SERVICES
  await t.throwsAsync(backend.sync(snap(svc1(['10.180.0.1:80']), svc2([])), partial('ns2/svc2:p8080')), {
    message: /line \d+.*-D KUBE-SERVICES/,
  });
  await backend.sync(snap(svc1(['10.180.0.1:80']), svc2([])), partial('ns2/svc2:p8080'));
  t.is(fake.chain('nat', 'KUBE-SERVICES')!.length, 1);
  t.is(fake.chain('filter', 'KUBE-SERVICES')!.length, 1);
});

test('a large full sync is split into transactions that end in the same state', async (t) => {
  const s = synthSnapshot(40, 5);
  const one = setup();
  await one.backend.sync(s, FULL);
  const split = setup({ maxLinesPerTransaction: 100 });
  const result = await split.backend.sync(s, FULL);
  t.true(result.transactions > 5, `${result.transactions} transactions`);
  t.is(split.fake.dump('nat'), one.fake.dump('nat'));
  t.is(split.fake.dump('filter'), one.fake.dump('filter'));
  // Removing every service in split transactions deletes every chain.
  await split.backend.sync(snap(), FULL);
  t.false(/KUBE-S(VC|EP)-/.test(split.fake.dump('nat')));
});

test('cleanup removes drover chains and hooks and leaves everything else', async (t) => {
  const { fake, backend } = setup();
  fake.setChain('nat', 'DOCKER', ['-j RETURN']);
  fake.chain('nat', 'PREROUTING')!.push('-m addrtype --dst-type LOCAL -j DOCKER');
  const before = { nat: fake.dump('nat'), filter: fake.dump('filter') };
  await backend.sync(snap(svc1(['10.180.0.1:80']), svc2([])), FULL);
  t.not(fake.dump('nat'), before.nat);
  const result = await backend.cleanup();
  t.deepEqual({ nat: fake.dump('nat'), filter: fake.dump('filter') }, before);
  // KUBE-SVC, KUBE-SEP, 4 static nat chains, 5 static filter chains, the canaries of mangle, nat and filter; the Docker hook is not drover's.
  t.deepEqual(result, { removed: { chain: 14, rule: 15 }, kept: [] });
  t.false(await fake.chainExists('mangle', 'KUBE-PROXY-CANARY'));
});

test('cleanup empties but keeps the chains foreign rules jump to, and reports them with those rules', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  // An operator's rule and a kube-proxy leftover that jump to drover's chains.
  fake.chain('nat', 'PREROUTING')!.push('-j KUBE-MARK-MASQ');
  fake.setChain('nat', 'KUBE-XLB-XPGD46QRK7WJZT7O', ['-j KUBE-SEP-SXIVWICOYRO3J4NJ']);
  const result = await backend.cleanup();
  t.deepEqual(result, {
    removed: { chain: 12, rule: 15 },
    kept: [
      { table: 'nat', chain: 'KUBE-MARK-MASQ', referencedBy: ['-A PREROUTING -j KUBE-MARK-MASQ'] },
      { table: 'nat', chain: 'KUBE-SEP-SXIVWICOYRO3J4NJ', referencedBy: ['-A KUBE-XLB-XPGD46QRK7WJZT7O -j KUBE-SEP-SXIVWICOYRO3J4NJ'] },
    ],
  });
  t.is(
    fake.restores.at(-1),
    `*nat
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
-D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-D PREROUTING ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-D OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-D OUTPUT ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-D POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-X KUBE-NODEPORTS
-X KUBE-POSTROUTING
-X KUBE-SERVICES
-X KUBE-SVC-XPGD46QRK7WJZT7O
COMMIT
*filter
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SERVICES - [0:0]
-D INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-D INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-D INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-D INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-D FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-D FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-D FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-D FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-D OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-D OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-X KUBE-EXTERNAL-SERVICES
-X KUBE-FORWARD
-X KUBE-NODEPORTS
-X KUBE-PROXY-FIREWALL
-X KUBE-SERVICES
COMMIT
`,
  );
  t.is(
    fake.dump('nat'),
    `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
:KUBE-XLB-XPGD46QRK7WJZT7O - [0:0]
-A PREROUTING -j KUBE-MARK-MASQ
-A KUBE-XLB-XPGD46QRK7WJZT7O -j KUBE-SEP-SXIVWICOYRO3J4NJ
COMMIT
`,
  );
  t.false(fake.dump('filter').includes('KUBE-'));
  // Once the foreign rules are gone, a second cleanup deletes the kept chains.
  fake.chain('nat', 'PREROUTING')!.pop();
  fake.chain('nat', 'KUBE-XLB-XPGD46QRK7WJZT7O')!.pop();
  t.deepEqual(await backend.cleanup(), { removed: { chain: 2, rule: 0 }, kept: [] });
  t.false(fake.dump('nat').includes('KUBE-MARK-MASQ'));
});

test('a stale chain that a foreign rule still jumps to is emptied, not deleted, and syncs keep working', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  // A kube-proxy leftover that jumps to drover's service chain.
  fake.setChain('nat', 'KUBE-XLB-XPGD46QRK7WJZT7O', ['-j KUBE-SVC-XPGD46QRK7WJZT7O']);
  const result = await backend.sync(snap(svc2(['10.180.0.9:8080'])), FULL);
  t.like(result, { deleted: { chain: 1 } }, 'only the KUBE-SEP chain is deleted');
  t.deepEqual(fake.chain('nat', 'KUBE-SVC-XPGD46QRK7WJZT7O'), [], 'the pinned chain is emptied');
  t.deepEqual(fake.chain('nat', 'KUBE-XLB-XPGD46QRK7WJZT7O'), ['-j KUBE-SVC-XPGD46QRK7WJZT7O'], 'the foreign chain is untouched');
  t.true(fake.dump('nat').includes('--to-destination 10.180.0.9:8080'), 'the new service is programmed');
  // And the next full sync has nothing to do.
  t.like(await backend.sync(snap(svc2(['10.180.0.9:8080'])), FULL), { transactions: 0 });
});

test('a foreign rule whose comment holds a newline neither confuses the read-back nor reaches a payload', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  // What iptables-save prints for `-m comment --comment $'hello\n-A KUBE-SERVICES -j ACCEPT'` in another chain…
  fake.setChain('nat', 'DOCKER', ['-m comment --comment "hello\n-A KUBE-SERVICES -j ACCEPT" -j RETURN']);
  t.like(await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL), { transactions: 0 }, 'nothing to repair');
  // …and inside an owned chain: the chain is rewritten whole instead of deleting the rule by specification.
  fake.chain('nat', 'KUBE-SERVICES')!.push('-m comment --comment "x\ny" -j RETURN');
  await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  t.false(fake.restores.at(-1)!.includes('x\ny'));
  t.deepEqual(fake.chain('nat', 'KUBE-SERVICES'), [
    '-d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O',
  ]);
});

test('incomplete source: a restarted full sync repairs the listed service port and keeps every rule and chain of the others; a whole one deletes them', async (t) => {
  const { fake, backend, make } = setup();
  const svc3 = sp('ns3/svc3:p53', '172.30.0.43', 53, [], { protocol: 'UDP' });
  await backend.sync(snap(svc1(['10.180.0.1:80', '10.180.0.2:80']), svc2(['10.180.0.9:8080']), svc3), FULL);
  const nat = fake.dump('nat');
  const filter = fake.dump('filter');
  // svc2 and svc3 are in the part of the source that could not be read; svc1 lost an endpoint.
  const restarted = make();
  await restarted.sync(snap(svc1(['10.180.0.1:80'])), { ...FULL, incomplete: true });
  t.is(
    fake.restores.at(-1),
    `*nat
:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
:KUBE-SEP-LXVODXWDISEETFEF - [0:0]
-A KUBE-SVC-XPGD46QRK7WJZT7O ! -s 10.0.0.0/8 -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
-X KUBE-SEP-LXVODXWDISEETFEF
COMMIT
`,
  );
  t.is(fake.dump('filter'), filter, 'the REJECT of svc3 stays');
  for (const line of nat.split('\n').filter((l) => l.includes('ns2/svc2'))) t.true(fake.dump('nat').includes(line), line);
  // Whole again: svc2 and svc3 go.
  await restarted.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  t.false(fake.dump('nat').includes('ns2/svc2'));
  t.deepEqual(fake.chain('filter', 'KUBE-SERVICES'), []);
});

test('internalTrafficPolicy switched by partial syncs: each step leaves the kernel as a full sync of it would; cleanup leaves no KUBE-SVL', async (t) => {
  const { fake, backend } = setup();
  const node = { name: 'n1', addresses: [] };
  const eps = (...names: string[]) => names.map((n, i) => ep(`10.180.0.${i + 1}:80`, { nodeName: n }));
  const web = (itp: 'Cluster' | 'Local', endpoints: ReturnType<typeof eps>) => sp('ns1/svc1:p80', '172.30.0.41', 80, endpoints, { internalTrafficPolicy: itp });
  const states = [
    web('Cluster', eps('n1', 'n2')),
    web('Local', eps('n1', 'n2')), // KUBE-SVC goes, KUBE-SVL with the n1 endpoint comes
    web('Local', eps('n2', 'n2')), // no local endpoint: the jump goes, a DROP comes
    web('Local', eps('n1', 'n2')), // back to KUBE-SVL
    web('Cluster', eps('n1', 'n2')), // back to KUBE-SVC
  ];
  // Line sets: a partial sync appends a new KUBE-SERVICES jump where a full one sorts it in (their order does not matter, each matches its own ClusterIP:port).
  const tables = (f: FakeIptables) => ({ nat: f.dump('nat').split('\n').sort(), filter: f.dump('filter').split('\n').sort() });
  for (const [i, state] of states.entries()) {
    const s = { ...snap(state, svc2(['10.180.0.9:8080'])), node };
    await backend.sync(s, i === 0 ? FULL : partial('ns1/svc1:p80'));
    const fresh = setup();
    await fresh.backend.sync(s, FULL);
    t.deepEqual(tables(fake), tables(fresh.fake), `step ${i}`);
    // drover itself sees the kernel converged: a full sync of the same state writes nothing.
    t.like(await backend.sync(s, FULL), { written: { chain: 0, rule: 0 } }, `step ${i}, then a full sync`);
  }
  t.regex(fake.dump('nat'), /KUBE-SVC-XPGD46QRK7WJZT7O/);
  await backend.sync({ ...snap(states[1]!, svc2(['10.180.0.9:8080'])), node }, partial('ns1/svc1:p80'));
  t.regex(fake.dump('nat'), /:KUBE-SVL-XPGD46QRK7WJZT7O/);
  t.notRegex(fake.dump('nat'), /KUBE-SVC-XPGD46QRK7WJZT7O/);
  await backend.cleanup();
  t.notRegex(`${fake.dump('nat')}${fake.dump('filter')}`, /KUBE-(SVL|SVC|SEP)-/);
});

test('a partial sync removes what a service port was rendered with on the node it had then, not on the new one', async (t) => {
  const { fake, backend } = setup();
  const web = sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80', { nodeName: 'n1' }), ep('10.180.0.2:80', { nodeName: 'n2' })], { internalTrafficPolicy: 'Local' });
  await backend.sync({ ...snap(web), node: { name: 'n1', addresses: [] } }, FULL);
  t.regex(fake.dump('nat'), /DNAT --to-destination 10\.180\.0\.1:80/);
  const moved = { ...snap(web), node: { name: 'n2', addresses: [] } };
  await backend.sync(moved, partial('ns1/svc1:p80'));
  const fresh = setup();
  await fresh.backend.sync(moved, FULL);
  const lines = (f: FakeIptables) => [f.dump('nat'), f.dump('filter')].map((d) => d.split('\n').sort());
  t.deepEqual(lines(fake), lines(fresh.fake));
  t.notRegex(fake.dump('nat'), /10\.180\.0\.1:80/, "n1's endpoint chain is gone");
});
