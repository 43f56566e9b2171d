/**
 * The iptables backend at scale, over the fake (npm run test:scale): plans
 * and full syncs of a node that had 30,000 Services stay within the call
 * stack. The same paths on small inputs are in test/unit/iptables-backend.
 */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { emptyPlan, mergePlans } from '../../src/kernel/iptables/plan.ts';
import { splitPlan } from '../../src/modes/iptables/split.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const render = { clusterCIDR: '10.0.0.0/8', masqueradeAll: false };
const FULL = { full: true, changed: new Set<string>() };

function setup() {
  const fake = new FakeIptables();
  return { fake, backend: new IptablesBackend({ exec: fake, render, logger: silentLogger() }) };
}

const svc1 = (eps: string[]) => sp('ns1/svc1:p80', '172.30.0.41', 80, eps.map((e) => ep(e)));

test('plans of hundreds of thousands of operations (30,000 services) are merged and split without exceeding the call stack', (t) => {
  const big = emptyPlan();
  for (let i = 0; i < 450_000; i++) big.nat.appendRules.push({ chain: `KUBE-SEP-${i}`, rule: '-j ACCEPT' });
  for (let i = 0; i < 200_000; i++) big.nat.deleteRules.push({ chain: 'KUBE-SERVICES', rule: `-d 10.0.0.${i % 256}/32 -j ACCEPT` });
  const merged = mergePlans(emptyPlan(), big);
  t.is(merged.nat.appendRules.length, 450_000);
  t.is(merged.nat.deleteRules.length, 200_000);
  t.is(merged.nat.appendRules[449_999]!.chain, 'KUBE-SEP-449999');
  const parts = splitPlan(merged, new Map(), 100_000);
  t.is(parts.reduce((n, p) => n + p.nat.appendRules.length + p.nat.deleteRules.length, 0), 650_000);
});

test('a full sync that deletes 150,000 stale chains (a node that had 30,000 services) stays within the call stack', async (t) => {
  const { fake, backend } = setup();
  await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  // Chain names of kube-proxy's shape (16 base32 characters), 'STALE' and the number in base32 with W, X, Y, Z for 0, 1, 8, 9.
  const stale = (i: number) => `KUBE-SEP-STALE${i.toString(32).toUpperCase().replace(/[0189]/g, (d) => 'WXYZ'['0189'.indexOf(d)]!).padStart(11, 'W')}`;
  for (let i = 0; i < 150_000; i++) fake.setChain('nat', stale(i), []);
  const result = await backend.sync(snap(svc1(['10.180.0.1:80'])), FULL);
  t.is(result.deleted.chain, 150_000);
  t.is(fake.chain('nat', stale(149_999)), undefined);
  t.regex(fake.dump('nat'), /DNAT --to-destination 10\.180\.0\.1:80/);
});
