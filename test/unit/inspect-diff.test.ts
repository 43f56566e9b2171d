import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { renderSnapshot } from '../../src/modes/iptables/snapshot.ts';
import { loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { driftItems, formatDrift, ruleChanges } from '../../src/modes/shared/kube-chains/diff.ts';
import { readTables } from '../../src/kernel/iptables/live.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const render = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };
const FULL = { full: true, changed: new Set<string>() };
const desiredSnapshot = snap(
  sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080'), ep('10.244.1.3:8080')]),
  sp('default/db:pg', '10.96.0.11', 5432, []),
);

/** `drover diff`'s output, and whether it finds differences, for the fake kernel. */
async function diff(fake: FakeIptables): Promise<{ text: string; differs: boolean }> {
  const items = driftItems(loadStaticRules(), renderSnapshot(desiredSnapshot, render), await readTables(fake));
  return { text: formatDrift(items), differs: items.length > 0 };
}

async function synced(): Promise<{ fake: FakeIptables; sync: () => Promise<unknown> }> {
  const fake = new FakeIptables();
  const sync = () => new IptablesBackend({ exec: fake, render, logger: silentLogger() }).sync(desiredSnapshot, FULL);
  await sync();
  return { fake, sync };
}

test('after a sync there are no differences and the exit code is 0', async (t) => {
  const { fake } = await synced();
  t.deepEqual(await diff(fake), { text: 'no differences\n', differs: false });
});

test('a chain deleted by hand and a rule added by hand are both reported, exit 1; a sync repairs both', async (t) => {
  const { fake, sync } = await synced();
  fake.dropChain('nat', 'KUBE-SEP-2AZ33KU3V5PGPQZH');
  fake.chain('nat', 'KUBE-SERVICES')!.push('-d 10.96.0.99/32 -p tcp -m tcp --dport 81 -j KUBE-MARK-MASQ');
  t.deepEqual(await diff(fake), {
    text: `missing chain nat KUBE-SEP-2AZ33KU3V5PGPQZH (default/web:http -> 10.244.1.3:8080)
extra rule nat KUBE-SERVICES: -d 10.96.0.99/32 -p tcp -m tcp --dport 81 -j KUBE-MARK-MASQ
`,
    differs: true,
  });
  await sync();
  t.deepEqual(await diff(fake), { text: 'no differences\n', differs: false });
});

test('changed chains show their differing rules; stale chains, missing rules and missing hooks are listed', async (t) => {
  const { fake } = await synced();
  // An endpoint jump replaced by hand, a REJECT and a hook deleted, a stale service chain left over.
  fake.chain('nat', 'KUBE-SVC-CDGGSHYLG3RE2FKL')![2] = '-m comment --comment "default/web:http -> 10.244.1.9:8080" -j KUBE-SEP-2AZ33KU3V5PGPQZH';
  fake.chain('filter', 'KUBE-SERVICES')!.length = 0;
  fake.chain('nat', 'OUTPUT')!.length = 0;
  fake.setChain('nat', 'KUBE-SVC-AAAAAAAAAAAAAAAA', ['-m comment --comment "default/old:http -> 10.244.3.3:80" -j KUBE-MARK-MASQ']);
  t.deepEqual(await diff(fake), {
    text: `changed chain nat KUBE-SVC-CDGGSHYLG3RE2FKL (default/web:http)
  - -m comment --comment "default/web:http -> 10.244.1.9:8080" -j KUBE-SEP-2AZ33KU3V5PGPQZH
  + -m comment --comment "default/web:http -> 10.244.1.3:8080" -j KUBE-SEP-2AZ33KU3V5PGPQZH
extra chain nat KUBE-SVC-AAAAAAAAAAAAAAAA (default/old:http)
missing hook nat OUTPUT: -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
missing hook nat OUTPUT: ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
missing rule filter KUBE-SERVICES: -d 10.96.0.11/32 -p tcp -m comment --comment "default/db:pg has no endpoints" -m tcp --dport 5432 -j REJECT --reject-with icmp-port-unreachable
`,
    differs: true,
  });
});

test('a missing static chain is named without a service label', async (t) => {
  const { fake } = await synced();
  fake.dropChain('filter', 'KUBE-FORWARD');
  t.is((await diff(fake)).text, 'missing chain filter KUBE-FORWARD\n');
});

test('ruleChanges keeps common rules out and compares in iptables-save form', (t) => {
  t.deepEqual(ruleChanges(['a', 'b', 'c'], ['a', 'x', 'c', 'd']), [
    { sign: '-', rule: 'b' },
    { sign: '+', rule: 'x' },
    { sign: '+', rule: 'd' },
  ]);
  // 10 decimals rendered, 11 read back: the same rule.
  t.deepEqual(ruleChanges(['-m statistic --mode random --probability 0.50000000000 -j X'], ['-m statistic --mode random --probability 0.5000000000 -j X']), []);
});
