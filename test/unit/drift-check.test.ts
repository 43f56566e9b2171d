/** iptables mode's cheap drift check (canary chains, nf_tables generation) and the proxier's use of it between full read-backs. */
import test from 'ava';
import { pino } from 'pino';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { ReadBackBudget } from '../../src/modes/shared/read-back.ts';
import { Proxier, type LastSync } from '../../src/proxier/proxier.ts';
import type { SourceRead } from '../../src/sources/source.ts';
import { ProxyHealth } from '../../src/server/health.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { until } from '../support/wait.ts';

const render = { clusterCIDR: '10.0.0.0/8', masqueradeAll: false };
const FULL = { full: true, changed: new Set<string>() };
const a = (eps: string[]) => sp('ns/a:http', '172.30.0.1', 80, eps.map((e) => ep(e)));

test('the drift check: clean after a full sync and after drover\'s own writes; a foreign commit or a lost canary is named', async (t) => {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render, logger: silentLogger() });
  t.is(await backend.driftCheck(), 'nothing is known to be programmed');
  await backend.sync(snap(a(['10.180.0.1:80'])), FULL);
  for (const table of ['mangle', 'nat', 'filter'] as const) t.true(await fake.chainExists(table, 'KUBE-PROXY-CANARY'), table);
  t.is(await backend.driftCheck(), undefined);

  await backend.sync(snap(a(['10.180.0.1:80', '10.180.0.2:80'])), { full: false, changed: new Set(['ns/a:http']) });
  t.is(await backend.driftCheck(), undefined, "drover's own partial write is not drift");

  fake.commitElsewhere();
  t.regex((await backend.driftCheck())!, /^nf_tables generation \d+, not \d+ as drover left it: another program committed rules$/);
  // A write of drover's after the foreign commit does not hide it.
  await backend.sync(snap(a(['10.180.0.1:80'])), { full: false, changed: new Set(['ns/a:http']) });
  t.regex((await backend.driftCheck())!, /another program committed rules/);
  await backend.sync(snap(a(['10.180.0.1:80'])), FULL);
  t.is(await backend.driftCheck(), undefined, 'a full sync clears it');

  // iptables -F keeps every chain, the canary too: the missing hook jumps tell.
  const noGeneration = new IptablesBackend({ exec: Object.assign(Object.create(fake) as FakeIptables, { generation: undefined }), render, logger: silentLogger() });
  await noGeneration.sync(snap(a(['10.180.0.1:80'])), FULL);
  fake.flushRules('nat');
  t.is(await noGeneration.driftCheck(), 'hook rules are gone from nat PREROUTING, nat OUTPUT, nat POSTROUTING');
  await backend.sync(snap(a(['10.180.0.1:80'])), FULL);
  t.is(await backend.driftCheck(), undefined);

  fake.flushTable('mangle');
  t.is(await backend.driftCheck(), 'the KUBE-PROXY-CANARY chain is gone from mangle');
  fake.flushTable('filter');
  t.is(await backend.driftCheck(), 'the KUBE-PROXY-CANARY chain is gone from mangle, filter');
  await backend.sync(snap(a(['10.180.0.1:80'])), FULL);
  t.is(await backend.driftCheck(), undefined);
});

test('the proxier reads the kernel back only when the check suspects drift, or once per full sync period', async (t) => {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render, logger: silentLogger() });
  let read: SourceRead = { snapshot: snap(a(['10.180.0.1:80'])) };
  const source = { load: async () => read, watch: () => {}, close: () => {} };
  let fullSyncPeriodMs = 3_600_000;
  const proxier = new Proxier({ source, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 0, get fullSyncPeriodMs() { return fullSyncPeriodMs; } });
  const full = async () => (await proxier.syncOnce()).full;

  t.true(await full(), 'the first sync');
  const saves = fake.saves;
  t.false(await full(), 'a clean check: no read-back');
  read = { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])), changed: new Set(['ns/a:http']) };
  t.false(await full());
  t.true(fake.dump('nat').includes('10.180.0.2:80'), 'the change is written by the partial sync');
  t.is(fake.saves, saves, 'nothing was read back');

  // Someone flushes the nat table: the check sees the canary gone; the full sync repairs.
  fake.flushTable('nat');
  t.true(await full());
  t.true(fake.dump('nat').includes('10.180.0.2:80'));
  t.false(await full());

  fake.commitElsewhere();
  t.true(await full(), 'a foreign commit');
  t.false(await full());

  fullSyncPeriodMs = 0;
  t.true(await full(), 'the full sync period has passed');
});

test('a read-back that never ends (another program committing all the time) is put off: changes are served first, nothing is written, and it is retried with backoff', async (t) => {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render, logger: silentLogger() });
  let read: SourceRead = { snapshot: snap(a(['10.180.0.1:80'])) };
  let onChange = () => {};
  const source = { load: async () => read, watch: (f: () => void) => void (onChange = f), close: () => {} };
  const logged: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
  const syncs: LastSync[] = [];
  const proxier = new Proxier({ source, backend, logger, minSyncPeriodMs: 0, syncPeriodMs: 200, onSync: (l) => syncs.push(l) });
  const health = new ProxyHealth(400);
  health.listen(proxier);
  await proxier.start();
  t.teardown(() => proxier.stop());
  await until('the first sync', async () => syncs.length > 0, 10_000, 10);
  t.deepEqual(fake.saveTimeouts, [undefined, undefined], 'the first read-back is not bounded: there is nothing else to go by');

  fake.commitElsewhere();
  fake.endlessDumps = true;
  const putOff = () => logged.filter((l) => l.msg === 'kernel read-back put off: drift is unknown until one finishes; changes are still served by partial syncs');
  await until('two read-backs put off', async () => putOff().length >= 2, 10_000, 10);
  const restores = fake.restores.length;
  read = { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])), changed: new Set(['ns/a:http']) };
  onChange();
  await until('the change served', async () => fake.dump('nat').includes('10.180.0.2:80'), 10_000, 10);
  t.is(fake.restores.length, restores + 1, 'one restore: the partial sync; a read-back put off writes nothing');
  await until('three read-backs put off', async () => putOff().length >= 3, 10_000, 10);
  t.deepEqual(putOff().slice(0, 3).map((l) => [l.retryInMs, l.attempts, l.err]), [
    [200, 1, 'the kernel read-back (iptables-nft-save -t filter) did not finish within 3.0 s'],
    [400, 2, 'the kernel read-back (iptables-nft-save -t filter) did not finish within 3.0 s'],
    [800, 3, 'the kernel read-back (iptables-nft-save -t filter) did not finish within 3.0 s'],
  ]);
  t.true(fake.saveTimeouts.slice(2).every((ms) => ms === 3000), JSON.stringify(fake.saveTimeouts));
  t.false(syncs.some((s) => s.error !== undefined), 'no sync failed');
  t.is(health.healthz().status, 200);

  // The other program stops: the next retry reads back and clears the suspicion.
  fake.endlessDumps = false;
  const full = syncs.filter((s) => s.full).length;
  await until('a full sync', async () => syncs.filter((s) => s.full).length > full, 10_000, 10);
  t.is(await backend.driftCheck(), undefined);
  t.true(fake.dump('nat').includes('10.180.0.2:80'));
});

test('the bound of a read-back that can be put off: 4 times the fastest of the last ones that finished, within 3 s and 120 s', (t) => {
  const budget = new ReadBackBudget();
  t.is(budget.boundMs(), 3000, 'none finished yet');
  budget.finished(100);
  t.is(budget.boundMs(), 3000);
  // The tables grew: once the small read-backs leave the window, the bound follows the new size.
  const grown = new ReadBackBudget({ window: 2 });
  grown.finished(100);
  grown.finished(9600);
  t.is(grown.boundMs(), 3000, 'the fastest of the window');
  grown.finished(9700);
  t.is(grown.boundMs(), 38_400);
  grown.finished(60_000);
  t.is(grown.boundMs(), 38_800, 'a read-back slowed by another program commits does not widen the bound');
  const huge = new ReadBackBudget({ window: 1 });
  huge.finished(60_000);
  t.is(huge.boundMs(), 120_000, 'at most maxMs');
  // An unbounded first read-back that dragged on under churn, then a quiet one: the bound is the quiet one's.
  budget.finished(59_000);
  t.is(budget.boundMs(), 3000);
  t.is(new ReadBackBudget({ minMs: 50, factor: 2, maxMs: 1000 }).boundMs(), 50);
});
