/**
 * The benchmark's IPVS harness on in-memory IPVS, ipset, links and
 * iptables: its read-back check, that every baseline brings the kernel to
 * what drover's partial sync serves, and the exact minimal and whole-state
 * changes.
 */
import test from 'ava';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { desiredServicePort } from '../../src/modes/ipvs/desired.ts';
import { FakeIpset } from '../../src/kernel/ipset/fake.ts';
import { FakeIpvs } from '../../src/kernel/ipvs/fake.ts';
import { FakeLinks } from '../../src/kernel/rtnetlink/fake.ts';
import { FakeSysctls } from '../../src/modes/ipvs/fake.ts';
import { describeOp } from '../../src/modes/ipvs/reconcile.ts';
import { iterationChanges, type ClockService } from '../../src/bench/changes.ts';
import { ipvsHarness } from '../../src/bench/modes/ipvs/harness.ts';
import { concatChanges, minimalIpvsChange, wholeIpvsState } from '../../src/bench/modes/ipvs/payloads.ts';
import { BENCH_CLUSTER_CIDR, benchSnapshot, clockServicePort, type RealEndpoint } from '../../src/bench/synth.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { ipvsDetail } from '../../src/modes/ipvs/sync-detail.ts';

const FULL = { full: true, changed: new Set<string>() };
const keep: RealEndpoint = { backend: 'b1', ip: '10.244.1.2', port: 8080 };
const toggle: RealEndpoint = { backend: 'b2', ip: '10.244.2.2', port: 8080 };
const clocks: ClockService[] = [{ port: clockServicePort(0, [keep, toggle]), keep, toggle }];
const COUNTS = { removalConfirm: 10, failConfirm: 3 };
const PLAN = { scheduler: 'rr' };

function harness() {
  const io = { ipvs: new FakeIpvs(), ipset: new FakeIpset(), iptables: new FakeIptables(), links: new FakeLinks(), sysctls: new FakeSysctls() };
  const h = ipvsHarness({ ...io, close: () => undefined }, { iptablesVariant: 'nft', render: { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false } });
  return { io, h };
}

/**
 * A harness whose kernel holds `snapshot`, the clock service's toggled real
 * server with an active connection, as the data-path prober leaves it on a
 * real kernel: removing it then quiesces it (weight 0) instead of deleting it.
 */
async function startAt(snapshot: Snapshot) {
  const made = harness();
  await made.h.backend.sync(snapshot, FULL);
  made.io.ipvs.setConns(`TCP/${clocks[0]!.port.clusterIP}:80`, `${toggle.ip}:${toggle.port}`, 1, 0);
  return made;
}

/**
 * What serves traffic: every virtual server with its real servers that take
 * new connections (weight > 0), kube-ipvs0's addresses and the set entries,
 * sorted. A quiesced real server (weight 0) is left out: drover's graceful
 * termination keeps one where the raw baseline deletes it.
 */
async function serving(io: ReturnType<typeof harness>['io']): Promise<string> {
  const lines: string[] = [];
  for (const s of (await io.ipvs.dumpServices()).entries) {
    lines.push(`vs ${s.protocol}/${s.address}:${s.port} ${s.scheduler}`);
    for (const d of (await io.ipvs.dumpDests(s)).entries) if (d.weight > 0) lines.push(`rs ${s.address}:${s.port} ${d.address}:${d.port} w${d.weight}`);
  }
  const index = await io.links.find('kube-ipvs0');
  for (const a of index === undefined ? [] : await io.links.addresses(index)) lines.push(`addr ${a.address}/${a.prefixLength}`);
  lines.push(...(await io.ipset.save()).split('\n').filter((l) => l.startsWith('add ')));
  return lines.sort().join('\n');
}

test('the read-back check sees each change only once it is applied', async (t) => {
  const base = benchSnapshot(6, 3, clocks.map((c) => c.port));
  const { h } = await startAt(base);
  t.true(h.showsAll(await h.readBack(), base));
  for (const c of iterationChanges(base, clocks, 0, [keep, toggle], COUNTS)) {
    t.false(h.shows(await h.readBack(c), c), `${c.kind} before`);
    const result = await h.backend.sync(c.to, { full: false, changed: new Set([c.key]) });
    if (c.kind === 'endpoint-removed') t.is(ipvsDetail(result)?.ops['quiesce-dest'], 1, 'the removed real server is quiesced, not deleted');
    t.true(h.shows(await h.readBack(c), c), `${c.kind} after`);
    t.true(h.showsAll(await h.readBack(), c.to), `${c.kind}: the whole state`);
  }
  t.true(h.showsAll(await h.readBack(), base), 'the four changes put the state back');
});

test('a focused read-back asks for the changed virtual server only', async (t) => {
  const base = benchSnapshot(6, 3, clocks.map((c) => c.port));
  const { io, h } = await startAt(base);
  const [removed] = iterationChanges(base, clocks, 0, [keep, toggle], COUNTS);
  const before = io.ipvs.requests;
  const state = await h.readBack(removed);
  t.is(io.ipvs.requests - before, 2, 'GET_SERVICE and one destination dump');
  t.deepEqual([...state.servers.keys()], [`TCP/${clocks[0]!.port.clusterIP}:80`]);
});

test('every baseline serves what drover partial sync serves, and the pairs put the kernel back exactly', async (t) => {
  const base = benchSnapshot(6, 3, clocks.map((c) => c.port));
  const changes = iterationChanges(base, clocks, 0, [keep, toggle], COUNTS);
  for (const method of ['raw', 'kube-proxy', 'full-rerender'] as const) {
    const { io, h } = await startAt(base);
    const { io: ref, h: dh } = await startAt(base);
    const start = await serving(io);
    const baseline = method === 'raw' ? h.raw : method === 'kube-proxy' ? h.perChange[0]! : h.whole!;
    t.is(baseline.method, method);
    for (const c of changes) {
      await baseline.prepare(c).apply();
      await dh.backend.sync(c.to, { full: false, changed: new Set([c.key]) });
      t.is(await serving(io), await serving(ref), `${method}: ${c.kind}`);
      t.true(h.shows(await h.readBack(c), c), `${method}: ${c.kind} shows`);
    }
    t.is(await serving(io), start, `${method}: back at the start`);
    // drover's own backend finds nothing to repair after its kernel was changed behind its back and put back.
    t.true(h.wroteNothing(await h.backend.sync(base, FULL)), `${method}: nothing to repair`);
  }
});

test('a full sync that repairs something is not "wrote nothing"', async (t) => {
  const base = benchSnapshot(6, 3, clocks.map((c) => c.port));
  const { io, h } = await startAt(base);
  const sp = clocks[0]!.port;
  await io.ipvs.delDest({ protocol: 'TCP', address: sp.clusterIP, port: 80 }, { address: keep.ip, port: keep.port });
  t.false(h.wroteNothing(await h.backend.sync(base, FULL)));
  t.true(h.wroteNothing(await h.backend.sync(base, FULL)));
});

test('the minimal IPVS changes: one real server, or one virtual server with its real servers, entries and address', (t) => {
  const sp = clocks[0]!.port;
  const both = desiredServicePort(sp, PLAN);
  const one = desiredServicePort({ ...sp, endpoints: sp.endpoints.filter((e) => e.ip === keep.ip) }, PLAN);
  const removed = minimalIpvsChange(both, one);
  t.deepEqual(removed.ops.map(describeOp), [`del-dest TCP/${sp.clusterIP}:80 -> 10.244.2.2:8080`]);
  t.is(removed.ipset, 'del KUBE-LOOP-BACK 10.244.2.2,tcp:8080,10.244.2.2\n');
  t.deepEqual([removed.bind, removed.unbind], [[], []]);
  const added = minimalIpvsChange(undefined, both);
  t.deepEqual(added.ops.map(describeOp), [
    `add-service TCP/${sp.clusterIP}:80 rr`,
    `add-dest TCP/${sp.clusterIP}:80 -> 10.244.1.2:8080 w1`,
    `add-dest TCP/${sp.clusterIP}:80 -> 10.244.2.2:8080 w1`,
  ]);
  t.is(
    added.ipset,
    `add KUBE-CLUSTER-IP ${sp.clusterIP},tcp:80\nadd KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2\nadd KUBE-LOOP-BACK 10.244.2.2,tcp:8080,10.244.2.2\nadd KUBE-IPVS-IPS ${sp.clusterIP}\n`,
  );
  t.deepEqual(added.bind, [sp.clusterIP]);
  const gone = minimalIpvsChange(both, undefined);
  t.deepEqual(gone.ops.map(describeOp), [`del-service TCP/${sp.clusterIP}:80`]);
  t.deepEqual(gone.unbind, [sp.clusterIP]);
  t.is(gone.ipset.split('\n')[0], `del KUBE-CLUSTER-IP ${sp.clusterIP},tcp:80`);
  t.throws(() => minimalIpvsChange(both, desiredServicePort({ ...sp, port: 81 }, PLAN)), { message: /different virtual servers/ });
});

test('the whole state re-sent: SET_SERVICE and SET_DEST for everything, every entry and address', (t) => {
  const ports = [desiredServicePort(clocks[0]!.port, PLAN)];
  const whole = wholeIpvsState(ports);
  t.deepEqual(whole.ops.map((o) => o.kind), ['edit-service', 'edit-dest', 'edit-dest']);
  t.is(whole.ipset.split('\n').filter(Boolean).length, 4, 'KUBE-CLUSTER-IP, two KUBE-LOOP-BACK, KUBE-IPVS-IPS');
  t.deepEqual(whole.bind, [clocks[0]!.port.clusterIP]);
  const both = concatChanges(whole, minimalIpvsChange(undefined, ports[0]));
  t.is(both.ops.length, 6);
  t.is(both.ipset, whole.ipset + minimalIpvsChange(undefined, ports[0]).ipset);
});
