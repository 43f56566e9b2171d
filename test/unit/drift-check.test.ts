/** iptables mode's cheap drift check (canary chains, nf_tables generation) and the proxier's use of it between full read-backs. */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/modes/iptables/fake.ts';
import { Proxier, type SourceRead } from '../../src/proxier/proxier.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

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
