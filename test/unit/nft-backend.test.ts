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
import { TableModel } from '../../src/modes/nftables/model.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import type { ElementOp } from '../../src/modes/nftables/model.ts';
import { elementShape } from '../../src/modes/nftables/netlink-writer.ts';
import type { ServicePort, Snapshot } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

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
        if (r.detail?.mode === 'nftables' && r.detail.via === 'netlink') t.false(r.detail.structural);
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
