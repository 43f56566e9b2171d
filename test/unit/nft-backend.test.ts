/**
 * nftables mode's backend on the in-memory nft (fake.ts): partial syncs of
 * random changes leave the table exactly as a full sync wants it; element
 * changes go to the element writer, structure and interval sets to nft;
 * a failed transaction makes the next sync a full one; cleanup removes the
 * table.
 */
import test from 'ava';
import fc from 'fast-check';
import { NftablesBackend, planFullSync, type ElementWriter } from '../../src/modes/nftables/backend.ts';
import { NftBatchTooLargeError, NftRequestError } from '../../src/kernel/nftables/client.ts';
import { TableModel } from '../../src/modes/nftables/model.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import type { ElementOp } from '../../src/modes/nftables/model.ts';
import { elementShape } from '../../src/modes/nftables/netlink-writer.ts';
import type { ServicePort, Snapshot } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { isNftablesDetail } from '../../src/modes/nftables/sync-detail.ts';

const RENDER = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };
const NODE_IPS = ['192.168.1.1'];
const FULL = { full: true, changed: new Set<string>() };
const ZERO = { 'set entry': 0, set: 0, chain: 0 };

/** An element writer over the fake that accepts what the netlink writer accepts, and records what it wrote. */
function writerOf(fake: FakeNft, log: ElementOp[][]): ElementWriter {
  const inner = fake.writer();
  return {
    accepts: (ops) => ops.every((o) => elementShape(o.set) !== undefined),
    commit: async (ops) => {
      log.push([...ops]);
      return inner.commit(ops);
    },
  };
}

function backendOf(fake: FakeNft, log: ElementOp[][] = []): NftablesBackend {
  return new NftablesBackend({ nft: fake, elements: writerOf(fake, log), render: RENDER, frontends: { nodePortIPs: NODE_IPS }, logger: silentLogger() });
}

const POOL = ['10.244.1.2', '10.244.1.3', '10.244.2.2', '10.244.2.3'];
const KEYS = ['default/a:http', 'default/b:http', 'default/c:dns', 'default/d:http'];

/** One random version of service port `i` of {@link KEYS}. */
const servicePort = (i: number) =>
  fc
    .record({
      eps: fc.subarray(POOL),
      notReady: fc.subarray(POOL, { maxLength: 1 }),
      kind: fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer', 'ranges'),
      etp: fc.constantFrom('Cluster', 'Local'),
      itp: fc.constantFrom('Cluster', 'Local'),
      affinity: fc.constantFrom(undefined, 10, 20),
    })
    .map(({ eps, notReady, kind, etp, itp, affinity }): ServicePort => {
      const clusterIP = `10.96.0.${10 + i}`;
      const lb = kind === 'LoadBalancer' || kind === 'ranges';
      return sp(
        KEYS[i]!,
        clusterIP,
        i === 2 ? 53 : 80,
        eps.map((ip) => ep(`${ip}:8080`, { nodeName: ip.startsWith('10.244.1.') ? 'n1' : 'n2', ...(notReady.includes(ip) ? { ready: false, serving: true, terminating: true } : {}) })),
        {
          protocol: i === 2 ? 'UDP' : 'TCP',
          type: kind === 'ClusterIP' ? 'ClusterIP' : kind === 'NodePort' ? 'NodePort' : 'LoadBalancer',
          externalTrafficPolicy: etp as 'Cluster' | 'Local',
          internalTrafficPolicy: itp as 'Cluster' | 'Local',
          sessionAffinity: affinity === undefined ? null : { timeoutSeconds: affinity },
          frontends: {
            clusterIPs: [{ family: 'IPv4', ip: clusterIP }],
            ...(kind !== 'ClusterIP' ? { nodePort: 30000 + i } : {}),
            externalIPs: [],
            loadBalancerIngress: lb ? [{ family: 'IPv4', ip: `198.51.100.${i + 1}`, ipMode: 'VIP' }] : [],
            loadBalancerSourceRanges: kind === 'ranges' ? ['192.168.0.0/16', '10.0.0.0/8'] : [],
          },
        },
      );
    });

/** A snapshot: a random subset of the service ports, each in a random version. */
const snapshot = fc
  .tuple(...KEYS.map((_, i) => fc.option(servicePort(i), { nil: undefined })))
  .map((ports): Snapshot => ({ ...snap(...ports.filter((p): p is ServicePort => p !== undefined)), node: { name: 'n1', addresses: [] } }));

/** The service ports whose version differs between two snapshots. */
function changedKeys(a: Snapshot, b: Snapshot): Set<string> {
  return new Set(KEYS.filter((k) => JSON.stringify(a.services.get(k)) !== JSON.stringify(b.services.get(k))));
}

test('partial syncs of random changes leave every element as a full sync wants it; only elements go to the element writer', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(snapshot, { minLength: 2, maxLength: 6 }), async (states) => {
      const fake = new FakeNft();
      const log: ElementOp[][] = [];
      const b = backendOf(fake, log);
      await b.sync(states[0]!, FULL);
      for (let i = 1; i < states.length; i++) {
        const r = await b.sync(states[i]!, { full: false, changed: changedKeys(states[i - 1]!, states[i]!) });
        if (isNftablesDetail(r.detail) && r.detail.via === 'netlink') t.false(r.detail.structural);
        // A partial sync adds endpoint-count and affinity sets and never deletes them (a full sync prunes
        // those left unused); every element must already be what a full sync wants. (Planned, not synced:
        // a second backend's writes would leave the first one's model behind.)
        const plan = planFullSync(TableModel.fromLive(await fake.list()), states[i]!, RENDER, { nodePortIPs: NODE_IPS }, false);
        if (plan.ops.length > 0 || plan.structure.rebuild || plan.structure.addSets.length > 0) {
          t.fail(`after state ${i} a full sync still writes ${JSON.stringify(plan.ops)}`);
          return false;
        }
      }
      for (const ops of log) for (const o of ops) if (elementShape(o.set) === undefined) return false;
      return true;
    }),
    { numRuns: 60, seed: 20261202 },
  );
  t.pass();
});

test('an endpoint removed goes over the element writer alone, with a handful of elements', async (t) => {
  const fake = new FakeNft();
  const log: ElementOp[][] = [];
  const b = backendOf(fake, log);
  const web = (n: number) => sp('default/web:http', '10.96.0.10', 80, POOL.slice(0, n).map((ip) => ep(`${ip}:8080`)));
  await b.sync(snap(web(3), sp('default/other:http', '10.96.0.11', 80, POOL.slice(0, 2).map((ip) => ep(`${ip}:8080`)))), FULL);
  const scripts = fake.scripts.length;
  const r = await b.sync(snap(web(2), sp('default/other:http', '10.96.0.11', 80, POOL.slice(0, 2).map((ip) => ep(`${ip}:8080`)))), { full: false, changed: new Set(['default/web:http']) });
  t.deepEqual(r.detail, { mode: 'nftables', via: 'netlink', structural: false });
  t.is(fake.scripts.length, scripts, 'no nft script');
  t.deepEqual(log.at(-1), [
    { op: 'delete', set: 'endpoint-count-3', key: '10.96.0.10 . tcp . 80' },
    { op: 'delete', set: 'endpoints', key: '10.96.0.10 . tcp . 80 . 2' },
    { op: 'delete', set: 'hairpin', key: '10.244.2.2 . 10.244.2.2 . tcp . 8080' },
    { op: 'add', set: 'endpoint-count-2', key: '10.96.0.10 . tcp . 80' },
  ]);
});

test('a firewall range change goes to nft, which writes interval sets', async (t) => {
  const fake = new FakeNft();
  const log: ElementOp[][] = [];
  const b = backendOf(fake, log);
  const lb = (range: string) =>
    sp('default/lb:http', '10.96.0.12', 80, [ep('10.244.1.2:8080')], {
      type: 'LoadBalancer',
      frontends: { clusterIPs: [{ family: 'IPv4', ip: '10.96.0.12' }], nodePort: 30012, externalIPs: [], loadBalancerIngress: [{ family: 'IPv4', ip: '198.51.100.9', ipMode: 'VIP' }], loadBalancerSourceRanges: [range] },
    });
  await b.sync(snap(lb('192.168.0.0/16')), FULL);
  const r = await b.sync(snap(lb('172.16.0.0/12')), { full: false, changed: new Set(['default/lb:http']) });
  t.deepEqual(r.detail, { mode: 'nftables', via: 'nft', structural: false });
  t.is(fake.scripts.at(-1), 'delete element ip drover firewall-allow { 198.51.100.9 . tcp . 80 . 192.168.0.0/16 }\nadd element ip drover firewall-allow { 198.51.100.9 . tcp . 80 . 172.16.0.0/12 }\n');
});

test('a failed transaction writes nothing, and the next sync is a full one that mends the table', async (t) => {
  const fake = new FakeNft();
  const b = backendOf(fake);
  const one = snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]));
  const two = snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080'), ep('10.244.1.3:8080')]));
  await b.sync(one, FULL);
  fake.failNext = 'Error: Could not process rule: Cannot allocate memory';
  await t.throwsAsync(b.sync(two, { full: false, changed: new Set(['default/web:http']) }), { message: /Cannot allocate memory/ });
  fake.tamper((table) => table.sets.get('service-ips')!.elements.clear());
  const r = await b.sync(two, { full: false, changed: new Set(['default/web:http']) });
  t.true(r.full, 'the sync after a failure is full');
  t.deepEqual((await backendOf(fake).sync(two, FULL)).written, ZERO);
});

test('cleanup deletes the table; a cleanup of a node without it does nothing', async (t) => {
  const fake = new FakeNft();
  const b = backendOf(fake);
  await b.sync(snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')])), FULL);
  const r = await b.cleanup();
  t.deepEqual(r, { removed: { chain: 13, set: 13 }, kept: [] });
  t.false((await fake.list()).exists);
  t.deepEqual(await b.cleanup(), { removed: { chain: 0, set: 0 }, kept: [] });
});

test('close() closes the element writer, so that drover run can exit once stopped (an open netlink socket keeps the process alive)', async (t) => {
  const fake = new FakeNft();
  let closed = 0;
  const b = new NftablesBackend({ nft: fake, elements: { ...fake.writer(), close: () => void closed++ }, render: RENDER, frontends: { nodePortIPs: NODE_IPS }, logger: silentLogger() });
  await b.sync(snap(), FULL);
  await b.close();
  t.is(closed, 1);
});

/** `count` ClusterIP service ports of `endpoints` endpoints each, one of them a LoadBalancer with a source range (an interval set element). */
function manyPorts(count: number, endpoints: number): Snapshot {
  const ports: ServicePort[] = [];
  for (let i = 0; i < count; i++) {
    const eps = Array.from({ length: endpoints }, (_, e) => ep(`10.244.${i}.${e + 1}:8080`));
    const clusterIP = `10.96.1.${i + 1}`;
    ports.push(
      i === 0
        ? sp(`default/s${i}:http`, clusterIP, 80, eps, {
            type: 'LoadBalancer',
            frontends: { clusterIPs: [{ family: 'IPv4', ip: clusterIP }], nodePort: 30100, externalIPs: [], loadBalancerIngress: [{ family: 'IPv4', ip: '198.51.100.7', ipMode: 'VIP' }], loadBalancerSourceRanges: ['192.168.0.0/16'] },
          })
        : sp(`default/s${i}:http`, clusterIP, 80, eps),
    );
  }
  return snap(...ports);
}

test('a first sync from empty: the structure and the interval set by one nft -f, every other element over netlink in fill order; the table as one nft -f would write it', async (t) => {
  const fake = new FakeNft();
  const log: ElementOp[][] = [];
  const state = manyPorts(3, 2);
  const r = await backendOf(fake, log).sync(state, FULL);
  t.is(fake.scripts.length, 1);
  const script = fake.scripts[0]!;
  t.regex(script, /^table ip drover \{/);
  t.deepEqual(
    script.split('\n').filter((l) => l.startsWith('add element')),
    ['add element ip drover firewall-allow { 198.51.100.7 . tcp . 80 . 192.168.0.0/16 }'],
    'the only element nft writes is the interval set\'s',
  );
  t.is(log.length, 1, 'one netlink batch');
  const sets = log[0]!.map((o) => o.set);
  t.deepEqual([...new Set(sets)], ['endpoints', 'hairpin', 'endpoint-count-2', 'cluster-ips', 'external-ips', 'firewall', 'service-ips'], 'slot maps first, service-ips last');
  t.true(log[0]!.every((o) => o.op === 'add'));
  // The script, the pick rules put in place of its TCP-only ones over netlink (pick-rule.ts), the element batch.
  t.is(r.transactions, 3);
  t.deepEqual(fake.netlinkRules, ['pick: one of 2 endpoints, any protocol']);
  t.deepEqual(r.detail, { mode: 'nftables', via: 'nft+netlink', structural: true });
  // The same table as one nft -f of everything (no element writer) makes.
  const whole = new FakeNft();
  await new NftablesBackend({ nft: whole, render: RENDER, frontends: { nodePortIPs: NODE_IPS }, logger: silentLogger() }).sync(state, FULL);
  t.deepEqual(await fake.list(), await whole.list());
  t.deepEqual((await backendOf(fake).sync(state, FULL)).written, ZERO, 'a restart finds nothing to write');
});

test('a first sync whose elements do not fit one netlink batch goes in several, each within the socket; a failed batch fails the sync and the next full sync mends the table', async (t) => {
  const fake = new FakeNft();
  const inner = fake.writer();
  const sizes: number[] = [];
  let failAt = -1;
  const writer: ElementWriter = {
    accepts: (ops) => ops.every((o) => elementShape(o.set) !== undefined),
    commit: async (ops) => {
      // As netlink/client.ts does: a batch over the socket's limit is refused before anything is sent.
      if (ops.length > 300) throw new NftBatchTooLargeError(ops.length * 80, 300 * 80);
      if (sizes.length === failAt) throw new Error('ENOMEM');
      sizes.push(ops.length);
      return inner.commit(ops);
    },
  };
  const backend = () => new NftablesBackend({ nft: fake, elements: writer, render: RENDER, frontends: { nodePortIPs: NODE_IPS }, logger: silentLogger() });
  const state = manyPorts(40, 10); // 40 × 10 slots, 400 hairpin entries, 40 × 3 frontend entries
  failAt = 2;
  await t.throwsAsync(backend().sync(state, FULL), { message: 'ENOMEM' });
  t.deepEqual(sizes, [256, 256], 'halved from 4096 until a batch fits; the third batch failed');
  const b = backend();
  sizes.length = 0;
  failAt = -1;
  const r = await b.sync(state, FULL);
  t.deepEqual(r.detail, { mode: 'nftables', via: 'nft', structural: false }, 'the table exists now: mended in one transaction (too many elements for one netlink batch: nft -f)');
  t.deepEqual(sizes, []);
  const whole = new FakeNft();
  await new NftablesBackend({ nft: whole, render: RENDER, frontends: { nodePortIPs: NODE_IPS }, logger: silentLogger() }).sync(state, FULL);
  t.deepEqual(await fake.list(), await whole.list());
  // From empty again (after cleanup): every netlink element in batches of 256, the last one smaller.
  await b.cleanup();
  const fresh = await backend().sync(state, FULL);
  const netlinkElements = [...(await whole.list()).sets].filter(([name]) => elementShape(name) !== undefined).reduce((n, [, set]) => n + set.elements.size, 0);
  // Slots (10 per frontend: 40 ClusterIPs, s0's NodePort and LoadBalancer IP), hairpin entries, then per frontend its
  // endpoint-count and service-ips entries, the ClusterIPs' cluster-ips entries, s0's two external-ips and one firewall entry.
  t.is(netlinkElements, 420 + 400 + 42 + 42 + 40 + 2 + 1);
  t.is(sizes.reduce((a, n) => a + n, 0), netlinkElements);
  t.deepEqual(sizes.slice(0, -1), Array.from({ length: sizes.length - 1 }, () => 256));
  t.true(sizes.at(-1)! <= 256);
  t.is(fresh.transactions, 2 + sizes.length, 'the script, the pick rules over netlink, the element batches');
  t.deepEqual(await fake.list(), await whole.list());
});

test('a netlink read of the structure that fails is logged and the full sync reads the table with nft instead, and repairs it', async (t) => {
  const fake = new FakeNft();
  const inner = fake.writer();
  const warnings: string[] = [];
  const logger = { ...silentLogger(), warn: (_o: unknown, msg?: string) => void warnings.push(String(msg)) } as unknown as ReturnType<typeof silentLogger>;
  let failing = false;
  const elements: ElementWriter = {
    ...inner,
    structure: async () => {
      if (failing) throw new NftRequestError('structure', undefined, 'EINTR', 4);
      return undefined;
    },
  };
  const b = new NftablesBackend({ nft: fake, elements, render: RENDER, frontends: { nodePortIPs: NODE_IPS }, logger });
  const web = sp('default/web:http', '10.96.0.10', 80, POOL.slice(0, 2).map((ip) => ep(`${ip}:8080`)));
  await b.sync(snap(web), FULL);
  failing = true;
  // Drift: an element deleted by hand.
  await fake.writer().commit([{ op: 'delete', set: 'service-ips', key: '10.96.0.10 . tcp . 80' }]);
  const r = await b.sync(snap(web), FULL);
  t.true(r.written['set entry'] === 1, JSON.stringify(r.written));
  t.true((await fake.list()).sets.get('service-ips')!.elements.has('10.96.0.10 . tcp . 80'));
  t.deepEqual(warnings, ['reading table ip drover over netlink failed; reading it with nft -j instead']);
});

test('a sync whose write replaces pick rules says UDP entries may be left without NAT; one that writes elements alone, or nothing, does not', async (t) => {
  const fake = new FakeNft();
  const b = backendOf(fake, []);
  const web = (n: number) => sp('default/web:http', '10.96.0.10', 80, POOL.slice(0, n).map((ip) => ep(`${ip}:8080`)));
  const first = await b.sync(snap(web(2)), FULL);
  t.true(first.udpNotNATed, 'a first sync from empty writes the pick chain');
  const grown = await b.sync(snap(web(3)), { full: false, changed: new Set(['default/web:http']) });
  t.true(grown.udpNotNATed, 'a new endpoint count rewrites the pick chain');
  const back = await b.sync(snap(web(2)), { full: false, changed: new Set(['default/web:http']) });
  t.deepEqual([back.detail && isNftablesDetail(back.detail) ? back.detail.via : undefined, back.udpNotNATed], ['netlink', undefined], 'elements alone');
  const pruned = await b.sync(snap(web(2)), FULL);
  t.deepEqual([pruned.written.chain, pruned.udpNotNATed], [1, true], 'a full sync that drops the count-3 rule rewrites the pick chain');
  const idle = await b.sync(snap(web(2)), FULL);
  t.deepEqual([idle.transactions, idle.udpNotNATed], [0, undefined], 'a full sync with nothing to write');
});
