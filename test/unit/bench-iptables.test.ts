/**
 * The benchmark's iptables harness on an in-memory iptables: its read-back
 * check, and that every baseline payload leaves the kernel exactly as
 * drover's partial sync does.
 */
import test from 'ava';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { toIptablesVariant } from '../../src/kernel/iptables/exec.ts';
import { renderServicePort } from '../../src/modes/iptables/render.ts';
import { sharedRule } from '../../src/modes/shared/kube-chains/service-rules.ts';
import { iterationChanges, type ClockService } from '../../src/bench/changes.ts';
import { iptablesHarness } from '../../src/bench/modes/iptables/harness.ts';
import { fullRerenderPayload, kubeProxyPayload, minimalPayload } from '../../src/bench/modes/iptables/payloads.ts';
import { BENCH_CLUSTER_CIDR, benchSnapshot, clockServicePort, type RealEndpoint } from '../../src/bench/synth.ts';
import { loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import type { Snapshot } from '../../src/model/types.ts';

const RENDER = { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false };
const FULL = { full: true, changed: new Set<string>() };
const keep: RealEndpoint = { backend: 'b1', ip: '10.244.1.2', port: 8080 };
const toggle: RealEndpoint = { backend: 'b2', ip: '10.244.2.2', port: 8080 };
const clocks: ClockService[] = [{ port: clockServicePort(0, [keep, toggle]), keep, toggle }];
const COUNTS = { removalConfirm: 10, failConfirm: 3 };

function harness() {
  const fake = new FakeIptables();
  return { fake, h: iptablesHarness({ netns: 'unused', variant: 'nft', render: RENDER, exec: fake }) };
}

/** Both tables, each chain's rules sorted, so that rule order within KUBE-SERVICES (a set for drover) does not matter. */
function state(fake: FakeIptables): string {
  return ['nat', 'filter']
    .map((t) => fake.dump(t as 'nat' | 'filter').split('\n').filter((l) => !l.startsWith('#')).sort().join('\n'))
    .join('\n---\n');
}

async function startAt(snapshot: Snapshot) {
  const { fake, h } = harness();
  await h.backend.sync(snapshot, FULL);
  return { fake, h };
}

test('the read-back check sees each change only once it is applied', async (t) => {
  const base = benchSnapshot(6, 3, clocks.map((c) => c.port));
  const { h } = await startAt(base);
  t.true(h.showsAll(await h.readBack(), base));
  for (const c of iterationChanges(base, clocks, 0, [keep, toggle], COUNTS)) {
    t.false(h.shows(await h.readBack(), c), `${c.kind} before`);
    await h.backend.sync(c.to, { full: false, changed: new Set([c.key]) });
    t.true(h.shows(await h.readBack(), c), `${c.kind} after`);
  }
  t.true(h.showsAll(await h.readBack(), base), 'the four changes put the state back');
});

test('every baseline leaves the kernel exactly as drover partial sync does, and the pairs put it back', async (t) => {
  const base = benchSnapshot(6, 3, clocks.map((c) => c.port));
  const changes = iterationChanges(base, clocks, 0, [keep, toggle], COUNTS);
  const { fake: reference } = await startAt(base);
  const baseState = state(reference);
  for (const method of ['raw', 'kube-proxy', 'full-rerender'] as const) {
    const { fake, h } = await startAt(base);
    const { fake: drover, h: dh } = await startAt(base);
    const baseline = method === 'raw' ? h.raw : method === 'kube-proxy' ? h.perChange[0]! : h.whole!;
    t.is(baseline.method, method);
    for (const c of changes) {
      const prepared = baseline.prepare(c);
      await prepared.apply();
      t.is(prepared.bytes, Buffer.byteLength(fake.restores.at(-1)!));
      await dh.backend.sync(c.to, { full: false, changed: new Set([c.key]) });
      t.is(state(fake), state(drover), `${method}: ${c.kind}`);
      t.true(h.shows(await h.readBack(), c), `${method}: ${c.kind} shows`);
    }
    t.is(state(fake), baseState, `${method}: back at the start`);
  }
});

test('the minimal payload of an endpoint removal: the service chain rewritten and the endpoint chain deleted', (t) => {
  const before = renderServicePort(clocks[0]!.port, RENDER);
  const after = renderServicePort({ ...clocks[0]!.port, endpoints: clocks[0]!.port.endpoints.slice(0, 1) }, RENDER);
  t.is(
    minimalPayload(before, after),
    `*nat
:KUBE-SVC-IRVUBHIWURQDXDSZ - [0:0]
:KUBE-SEP-TFLGP7L4XX6GIK2K - [0:0]
-A KUBE-SVC-IRVUBHIWURQDXDSZ ! -s 10.244.0.0/16 -d 10.110.0.10/32 -p tcp -m comment --comment "bench/clock-0:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-IRVUBHIWURQDXDSZ -m comment --comment "bench/clock-0:http -> 10.244.1.2:8080" -j KUBE-SEP-XDFTP2QIH5PN4CWC
-X KUBE-SEP-TFLGP7L4XX6GIK2K
COMMIT
`,
  );
  t.is(minimalPayload(before, before), '');
});

test('the minimal payloads of a service added and removed: its chains and its one KUBE-SERVICES rule', (t) => {
  const svc = renderServicePort({ ...clocks[0]!.port, endpoints: clocks[0]!.port.endpoints.slice(0, 1) }, RENDER);
  const added = minimalPayload(undefined, svc).split('\n');
  t.deepEqual(added.filter((l) => l.startsWith(':')), [':KUBE-SVC-IRVUBHIWURQDXDSZ - [0:0]', ':KUBE-SEP-XDFTP2QIH5PN4CWC - [0:0]']);
  t.deepEqual(added.filter((l) => l.includes('KUBE-SERVICES')), [`-A KUBE-SERVICES ${(sharedRule(svc, 'nat') ?? null)}`]);
  const removed = minimalPayload(svc, undefined).split('\n');
  t.deepEqual(removed.slice(0, 4), ['*nat', ':KUBE-SVC-IRVUBHIWURQDXDSZ - [0:0]', ':KUBE-SEP-XDFTP2QIH5PN4CWC - [0:0]', `-D KUBE-SERVICES ${(sharedRule(svc, 'nat') ?? null)}`]);
  t.deepEqual(removed.slice(4), ['-X KUBE-SVC-IRVUBHIWURQDXDSZ', '-X KUBE-SEP-XDFTP2QIH5PN4CWC', 'COMMIT', '']);
});

test('the kube-proxy-style payload rewrites the static chains and the whole KUBE-SERVICES chain; the full one every chain', (t) => {
  const base = benchSnapshot(20, 3, clocks.map((c) => c.port));
  const all = [...base.services.values()].map((sp) => renderServicePort(sp, RENDER));
  const before = renderServicePort(clocks[0]!.port, RENDER);
  const after = renderServicePort({ ...clocks[0]!.port, endpoints: clocks[0]!.port.endpoints.slice(0, 1) }, RENDER);
  const kp = kubeProxyPayload(loadStaticRules(), all, before, after).split('\n');
  t.deepEqual(
    kp.filter((l) => l.startsWith('*') || l.startsWith(':') || l.startsWith('-X') || l === 'COMMIT'),
    [
      '*nat',
      ':KUBE-SERVICES - [0:0]',
      ':KUBE-NODEPORTS - [0:0]',
      ':KUBE-MARK-MASQ - [0:0]',
      ':KUBE-POSTROUTING - [0:0]',
      ':KUBE-SVC-IRVUBHIWURQDXDSZ - [0:0]',
      ':KUBE-SEP-TFLGP7L4XX6GIK2K - [0:0]',
      '-X KUBE-SEP-TFLGP7L4XX6GIK2K',
      'COMMIT',
      '*filter',
      ':KUBE-SERVICES - [0:0]',
      ':KUBE-EXTERNAL-SERVICES - [0:0]',
      ':KUBE-PROXY-FIREWALL - [0:0]',
      ':KUBE-NODEPORTS - [0:0]',
      ':KUBE-FORWARD - [0:0]',
      'COMMIT',
    ],
  );
  t.is(kp.filter((l) => l.startsWith('-A KUBE-SERVICES ')).length, 20, 'one jump per service port');
  const full = fullRerenderPayload(loadStaticRules(), all, undefined, undefined).split('\n');
  // 20 service chains + 19 × 3 + 2 endpoint chains + 9 static chains.
  t.is(full.filter((l) => l.startsWith(':')).length, 20 + 19 * 3 + 2 + 9);
  t.false(full.some((l) => l.startsWith('-I ')), 'the hooks are not repeated');
});

test('the bench names its iptables variant exactly: nft or legacy, anything else is refused', (t) => {
  t.is(toIptablesVariant('nft'), 'nft');
  t.is(toIptablesVariant('legacy'), 'legacy');
  t.throws(() => toIptablesVariant('nf_tables'), { message: 'unknown iptables variant nf_tables' });
  t.throws(() => toIptablesVariant(''), { message: 'unknown iptables variant ' });
});
