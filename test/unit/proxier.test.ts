/** The proxier's rule for an incomplete source: add and update, delete nothing, until the source is whole again. */
import test from 'ava';
import { pino } from 'pino';
import type { Backend, SyncResult } from '../../src/proxier/backend.ts';
import type { ConntrackExec } from '../../src/conntrack/exec.ts';
import type { StaleFlow } from '../../src/conntrack/stale.ts';
import type { Frontends } from '../../src/model/types.ts';
import { Proxier, type LastSync } from '../../src/proxier/proxier.ts';
import type { SourceRead } from '../../src/sources/source.ts';
import { silentLogger } from '../../src/util/log.ts';
import { dualSnap, ep, snap, sp } from '../support/snapshots.ts';
import { RecordingBackend } from '../support/recording-backend.ts';

const a = (eps: string[]) => sp('ns/a:http', '172.30.0.1', 80, eps.map((e) => ep(e)));
const b = sp('ns/b:http', '172.30.0.2', 80, [ep('10.180.0.9:80')]);

function setup(reads: SourceRead[]) {
  const backend = new RecordingBackend();
  const records: LastSync[] = [];
  let i = 0;
  const source = { load: async () => reads[Math.min(i++, reads.length - 1)]!, watch: () => {}, close: () => {} };
  const proxier = new Proxier({ source, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000, onSync: (l) => records.push(l) });
  return { backend, proxier, records };
}

test('a removal on an incomplete read is held back; the first whole read brings a full sync', async (t) => {
  const broken = ['f.yaml:13:1: document #3: syntax error: …; document skipped'];
  const { backend, proxier, records } = setup([
    { snapshot: snap(a(['10.180.0.1:80']), b) },
    { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])), incomplete: broken },
    { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])), incomplete: broken },
    { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])) },
    { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])) },
  ]);
  for (let n = 0; n < 5; n++) await proxier.syncOnce();
  t.deepEqual(backend.calls, [
    { services: ['ns/a:http', 'ns/b:http'], full: true, changed: [], incomplete: false },
    // b is missing from the read: its removal waits; a's new endpoint is written.
    { services: ['ns/a:http'], full: false, changed: ['ns/a:http'], incomplete: true },
    { services: ['ns/a:http'], full: false, changed: [], incomplete: true },
    // Whole again: a full sync deletes what was held.
    { services: ['ns/a:http'], full: true, changed: [], incomplete: false },
    { services: ['ns/a:http'], full: false, changed: [], incomplete: false },
  ]);
  t.deepEqual(records.map((r) => r.incomplete), [[], broken, broken, [], []]);
});

test('a first sync on an incomplete read is a full sync that deletes nothing', async (t) => {
  const { backend, proxier } = setup([{ snapshot: snap(a(['10.180.0.1:80'])), incomplete: ['f.yaml: syntax error; file skipped'] }, { snapshot: snap(a(['10.180.0.1:80'])) }]);
  await proxier.syncOnce({ full: true });
  await proxier.syncOnce();
  t.deepEqual(backend.calls, [
    { services: ['ns/a:http'], full: true, changed: [], incomplete: true },
    { services: ['ns/a:http'], full: true, changed: [], incomplete: false },
  ]);
});

test('the service ports a read reports changed are what reaches the backend; the snapshots are not compared', async (t) => {
  const c = sp('ns/c:http', '172.30.0.3', 80, [ep('10.180.0.7:80')]);
  const { backend, proxier } = setup([
    { snapshot: snap(a(['10.180.0.1:80']), b) },
    // a changed, but the source says only c (which it lists as changed although it is not there): the report wins.
    { snapshot: snap(a(['10.180.0.2:80']), b), changed: new Set(['ns/c:http']) },
    { snapshot: snap(a(['10.180.0.2:80']), b, c), changed: new Set(['ns/c:http']) },
    { snapshot: snap(a(['10.180.0.2:80']), c), changed: new Set(['ns/b:http']) },
    { snapshot: snap(a(['10.180.0.2:80']), c), changed: new Set() },
  ]);
  for (let n = 0; n < 5; n++) await proxier.syncOnce();
  t.deepEqual(
    backend.calls.map((c) => [c.full, c.changed]),
    [
      [true, []],
      [false, ['ns/c:http']],
      [false, ['ns/c:http']],
      [false, ['ns/b:http']],
      [false, []],
    ],
  );
});

test('a read that cannot tell what changed has the snapshots compared', async (t) => {
  const { backend, proxier } = setup([
    { snapshot: snap(a(['10.180.0.1:80']), b), changed: new Set() },
    { snapshot: snap(a(['10.180.0.2:80']), b) },
    { snapshot: snap(a(['10.180.0.2:80'])), changed: undefined },
  ]);
  for (let n = 0; n < 3; n++) await proxier.syncOnce();
  t.deepEqual(backend.calls.map((c) => c.changed), [[], ['ns/a:http'], ['ns/b:http']]);
});

test('reported changes are kept until a sync succeeds', async (t) => {
  const backend = new RecordingBackend();
  let fail = false;
  const failing: Backend = {
    mode: 'iptables',
    sync: async (s, c) => {
      if (fail) throw new Error('iptables-restore failed');
      return backend.sync(s, c);
    },
    cleanup: () => backend.cleanup(),
  };
  const reads: SourceRead[] = [
    { snapshot: snap(a(['10.180.0.1:80']), b) },
    { snapshot: snap(a(['10.180.0.2:80']), b), changed: new Set(['ns/a:http']) },
    { snapshot: snap(a(['10.180.0.2:80']), b), changed: new Set(['ns/b:http']) },
    { snapshot: snap(a(['10.180.0.2:80']), b), changed: new Set() },
  ];
  let i = 0;
  const source = { load: async () => reads[i++]!, watch: () => {}, close: () => {} };
  const proxier = new Proxier({ source, backend: failing, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  await proxier.syncOnce();
  fail = true;
  await t.throwsAsync(proxier.syncOnce());
  fail = false;
  // After a failure the next sync is full: nothing reported before it is lost, nothing is left over after it.
  await proxier.syncOnce();
  await proxier.syncOnce();
  t.deepEqual(backend.calls.map((c) => [c.full, c.changed]), [[true, []], [true, []], [false, []]]);
});

test('a failed partial sync is retried as a full one after the backoff, and the failure is logged with its kind', async (t) => {
  const backend = new RecordingBackend();
  let failures = 1;
  const failing: Backend = {
    mode: 'iptables',
    sync: async (s, c) => {
      const call = backend.sync(s, c);
      if (!c.full && failures-- > 0) throw new Error('iptables-restore failed');
      return call;
    },
    cleanup: () => backend.cleanup(),
  };
  const reads: SourceRead[] = [
    { snapshot: snap(a(['10.180.0.1:80']), b) },
    { snapshot: snap(a(['10.180.0.2:80']), b), changed: new Set(['ns/a:http']) },
    { snapshot: snap(a(['10.180.0.2:80']), b), changed: new Set() },
  ];
  let i = 0;
  let onChange = () => {};
  const source = { load: async () => reads[Math.min(i++, reads.length - 1)]!, watch: (f: () => void) => void (onChange = f), close: () => {} };
  const logged: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'error' }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
  const times: number[] = [];
  const proxier = new Proxier({ source, backend: failing, logger, minSyncPeriodMs: 0, syncPeriodMs: 3_600_000, onSync: (l) => times.push(l.at) });
  await proxier.start();
  t.teardown(() => proxier.stop());
  while (times.length < 1) await new Promise((r) => setTimeout(r, 10));
  onChange();
  while (times.length < 3) await new Promise((r) => setTimeout(r, 10));
  t.deepEqual(backend.calls.map((c) => [c.full, c.changed]), [[true, []], [false, ['ns/a:http']], [true, []]]);
  t.deepEqual(logged.map((l) => [l.msg, l.full, l.retryInMs]), [['sync failed; will retry with a full sync', false, 1000]]);
  t.true(times[2]! - times[1]! >= 990, `retried after ${times[2]! - times[1]!} ms`);
});

test('on an incomplete read a reported removal is held back, a reported update is applied', async (t) => {
  const broken = ['f.yaml: syntax error; file skipped'];
  const { backend, proxier } = setup([
    { snapshot: snap(a(['10.180.0.1:80']), b) },
    { snapshot: snap(a(['10.180.0.2:80'])), changed: new Set(['ns/a:http', 'ns/b:http']), incomplete: broken },
    { snapshot: snap(a(['10.180.0.2:80'])), changed: new Set() },
  ]);
  for (let n = 0; n < 3; n++) await proxier.syncOnce();
  t.deepEqual(backend.calls, [
    { services: ['ns/a:http', 'ns/b:http'], full: true, changed: [], incomplete: false },
    { services: ['ns/a:http'], full: false, changed: ['ns/a:http'], incomplete: true },
    { services: ['ns/a:http'], full: true, changed: [], incomplete: false },
  ]);
});

test('sync listeners hear every attempt, in order; one that throws disturbs nothing', async (t) => {
  const { proxier, records } = setup([{ snapshot: snap(b) }]);
  const heard: string[] = [];
  const off = proxier.on('sync', (l) => heard.push(l.full ? 'full' : 'partial'));
  proxier.on('sync', () => {
    throw new Error('listener bug');
  });
  await proxier.syncOnce();
  off();
  await proxier.syncOnce();
  t.deepEqual(heard, ['full']);
  t.is(records.length, 2);
});

test('a node that starts leaving is no policy change: the sync stays partial; a new zone is one, and syncs in full', async (t) => {
  const node = { name: 'n1', zone: 'z1', addresses: [] };
  const withNode = (n: object) => ({ snapshot: { ...snap(a(['10.180.0.1:80'])), node: n as typeof node } });
  const { backend, proxier, records } = setup([
    withNode(node),
    withNode({ ...node, leaving: 'it has the ToBeDeletedByClusterAutoscaler taint' }),
    withNode({ ...node, zone: 'z2', leaving: 'it has the ToBeDeletedByClusterAutoscaler taint' }),
  ]);
  for (let n = 0; n < 3; n++) await proxier.syncOnce();
  t.deepEqual(backend.calls.map((c) => c.full), [true, false, true]);
  t.is(records[1]!.snapshot?.node?.leaving, 'it has the ToBeDeletedByClusterAutoscaler taint', 'the synced snapshot carries it, for /healthz');
});

test('stop() closes the backend once the loop has stopped', async (t) => {
  const { backend, proxier } = setup([{ snapshot: snap(b) }]);
  let closed = 0;
  (backend as unknown as { close: () => void }).close = () => void closed++;
  await proxier.start();
  await proxier.stop();
  t.is(closed, 1);
});

test('the source is told which reads are for a full sync, so that a watching file source reads everything then', async (t) => {
  const backend = new RecordingBackend();
  const asked: Array<boolean | undefined> = [];
  const read = { snapshot: snap(a(['10.180.0.1:80']), b), changed: new Set<string>() };
  const source = { load: async (opts?: { full?: boolean }) => (asked.push(opts?.full), read), watch: () => {}, close: () => {} };
  const proxier = new Proxier({ source, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  await proxier.syncOnce();
  await proxier.syncOnce();
  await proxier.syncOnce({ full: true });
  t.deepEqual(asked, [true, false, true]);
  t.deepEqual(backend.calls.map((c) => c.full), [true, false, true]);
});

test('UDP entries not DNATed are deleted after a sync whose result says its write may have left them, first sync included, in the families it names; otherwise not', async (t) => {
  const EMPTY: SyncResult = { full: true, services: 0, endpoints: 0, written: {}, deleted: {}, bytes: 0, transactions: 0, readMs: 0, applyMs: 0, totalMs: 0 };
  const v6: Frontends = { clusterIPs: [{ family: 'IPv6', ip: 'fd00:30::53' }], externalIPs: [], loadBalancerIngress: [], loadBalancerSourceRanges: [] };
  const udp = sp('ns/dns:dns', '172.30.0.53', 53, [ep('10.180.0.9:53')], { protocol: 'UDP' });
  const udp6 = sp('ns/dns:dns', 'fd00:30::53', 53, [ep('[fd00:180::9]:53')], { protocol: 'UDP', frontends: v6 });
  const deleted: StaleFlow[] = [];
  const conntrack: ConntrackExec = { deleteUDP: async (flow) => (deleted.push(flow), 2) };
  const results: Array<Partial<SyncResult>> = [{ udpNotNATed: true }, {}, { families: { IPv4: EMPTY, IPv6: { ...EMPTY, udpNotNATed: true } } }];
  let n = 0;
  const backend: Backend = { mode: 'iptables', sync: async (_s, c) => ({ ...EMPTY, full: c.full, ...results[n++] }), cleanup: async () => ({ removed: {}, kept: [] }) };
  const source = { load: async () => ({ snapshot: dualSnap([udp, b], [udp6]) }), watch: () => {}, close: () => {} };
  const proxier = new Proxier({ source, backend, conntrack, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  await proxier.syncOnce();
  t.deepEqual(deleted, [{ ip: '172.30.0.53', port: 53, notNATed: true }], 'the first sync, a result of IPv4 alone: its UDP frontend, not the TCP one');
  await proxier.syncOnce();
  t.is(deleted.length, 1, 'a result without it: nothing deleted');
  await proxier.syncOnce();
  t.deepEqual(deleted.slice(1), [{ family: 'IPv6', ip: 'fd00:30::53', port: 53, notNATed: true }], 'only the IPv6 family said so');
});
