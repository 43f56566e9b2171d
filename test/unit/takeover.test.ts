/**
 * `drover takeover`'s pure parts: the plan a survey leads to (refusals
 * included) and the exact text of the survey and the plan (src/takeover/plan.ts),
 * kube-proxy's tables found in `nft list tables` (survey.ts), the counts of
 * the report (takeover.ts), and the check of step 3 (verify.ts) over every
 * mode's fakes (ModeDriver.fake): the same snapshot programmed into two
 * modes gives no difference, a changed one names the frontend and both
 * endpoint sets.
 */
import test from 'ava';
import { modeDriver } from '../../src/modes/registry.ts';
import { formatPlan, formatSurvey, planTakeover } from '../../src/takeover/plan.ts';
import { kubeProxyTablesIn, type NodeSurvey } from '../../src/takeover/survey.ts';
import { countsText } from '../../src/takeover/takeover.ts';
import { compareFrontends, formatDifferences, frontendsToCheck } from '../../src/takeover/verify.ts';
import { IPTABLES_TO_NFTABLES_PLAN, NODE, traced, web } from '../support/takeover.ts';

const title = (m: string) => modeDriver(m).title;

/** A survey: iptables mode's state as `iptables`, IPVS mode's as `ipvs`, nftables mode's as `nftables`. */
function survey(found: { iptables?: string[]; ipvs?: string[]; nftables?: string[] }, kubeProxyTables: string[] = []): NodeSurvey {
  return {
    modes: [
      { mode: 'iptables', title: 'iptables', found: found.iptables ?? [], unread: [] },
      { mode: 'ipvs', title: 'IPVS', found: found.ipvs ?? [], unread: ["IPVS virtual servers: not read with --netns (netlink reads drover's own network namespace)"] },
      { mode: 'nftables', title: 'nftables', found: found.nftables ?? [], unread: [] },
    ],
    kubeProxyTables,
  };
}

test('iptables layout to nftables mode: the survey and the plan, as printed', (t) => {
  const s = survey({ iptables: ['iptables-nft IPv4: 13 chains, 15 hook rules'] });
  const plan = planTakeover(s, 'nftables', false);
  t.is(plan.refusal, undefined);
  t.is(
    formatSurvey(s) + formatPlan(plan, title),
    IPTABLES_TO_NFTABLES_PLAN,
  );
});

test("the target mode's own state is adopted, and with nothing else there nothing is checked or removed", (t) => {
  const plan = planTakeover(survey({ nftables: ['table ip drover: 13 chains, 14 sets and maps'] }), 'nftables', false);
  t.deepEqual([plan.adopt, plan.remove], [['table ip drover: 13 chains, 14 sets and maps'], []]);
  t.is(formatPlan(plan, title), 'plan:\n  1. full sync in nftables mode, adopting what is there\n  2. nothing else to remove\n');
});

test('a layout in the iptables variant drover does not use here is printed, and refuses the takeover: its hooks stay live', (t) => {
  const base = survey({ iptables: ['iptables-nft IPv4: 13 chains, 15 hook rules'] });
  const s: NodeSurvey = { ...base, modes: base.modes.map((m) => (m.mode === 'iptables' ? { ...m, elsewhere: ['iptables-legacy IPv4: 9 chains, 4 hook rules'] } : m)) };
  const plan = planTakeover(s, 'nftables', false);
  t.is(
    plan.refusal,
    "iptables mode's layout is also in iptables-legacy IPv4: 9 chains, 4 hook rules, which drover neither checks nor removes here: its hooks would keep sending connections where they sent them; remove it with that iptables variant's cleanup (drover cleanup --mode iptables --iptables-backend <variant>) first; nothing was changed",
  );
  t.true(formatSurvey(s).includes('  iptables mode: iptables-nft IPv4: 13 chains, 15 hook rules\n    also, in the other iptables variant: iptables-legacy IPv4: 9 chains, 4 hook rules\n'));
});

test("kube-proxy's nftables tables are checked, then deleted; with --force, deleted unchecked", (t) => {
  const s = survey({}, ['ip kube-proxy', 'ip6 kube-proxy']);
  const checked = planTakeover(s, 'nftables', false);
  t.is(checked.refusal, undefined);
  t.deepEqual([checked.checkTables, checked.deleteTables], [['ip kube-proxy', 'ip6 kube-proxy'], []]);
  t.is(
    formatPlan(checked, title),
    'plan:\n' +
      '  1. full sync in nftables mode, from nothing\n' +
      '  2. check every frontend: table ip kube-proxy, table ip6 kube-proxy must send it to the same endpoints as nftables mode\n' +
      '  3. remove table ip kube-proxy, table ip6 kube-proxy\n',
  );
  const forced = planTakeover(s, 'nftables', true);
  t.deepEqual([forced.checkTables, forced.deleteTables], [[], ['ip kube-proxy', 'ip6 kube-proxy']]);
  t.is(forced.refusal, undefined);
  t.is(
    formatSurvey(s).split('\n').at(-2) + '\n' + formatPlan(forced, title),
    '  kube-proxy nftables mode: table ip kube-proxy; table ip6 kube-proxy\n' +
      'plan:\n' +
      '  1. full sync in nftables mode, from nothing\n' +
      '  2. check every frontend: nothing to check\n' +
      '     (table ip kube-proxy, table ip6 kube-proxy unchecked: --force)\n' +
      '  3. remove table ip kube-proxy, table ip6 kube-proxy\n',
  );
});

test("kube-proxy's tables are found by name in nft list tables, and no other table is", (t) => {
  t.deepEqual(kubeProxyTablesIn('table ip nat\ntable ip6 kube-proxy\ntable ip drover\ntable inet kube-proxy\ntable ip kube-proxy-x\n'), ['ip6 kube-proxy']);
  t.deepEqual(kubeProxyTablesIn('table ip kube-proxy\n'), ['ip kube-proxy']);
  t.deepEqual(kubeProxyTablesIn(''), []);
});

test('the report counts a cleanup by kind, in words', (t) => {
  t.is(countsText({ chain: 13, rule: 15 }), '13 chains, 15 hook rules');
  t.is(countsText({ chain: 1, rule: 1, set: 0 }), '1 chain, 1 hook rule');
  t.is(countsText({ chain: 0 }), 'nothing');
});

test('the check finds no difference between iptables and nftables mode programmed from one snapshot, and names a changed frontend with both endpoint sets', async (t) => {
  const state = web(['10.180.0.1:8080', '10.180.0.2:8080']);
  const frontends = frontendsToCheck(state, NODE);
  t.deepEqual(frontends.map((f) => f.label), ['TCP 172.30.0.50:80 (nsd/web:http ClusterIP)', 'TCP 192.168.100.1:30080 (nsd/web:http NodePort)']);
  const iptables = await traced('iptables', state);
  t.deepEqual(compareFrontends(frontends, { IPv4: iptables }, { IPv4: await traced('nftables', state) }), []);
  const moved = await traced('nftables', web(['10.180.0.3:8080']));
  const diffs = compareFrontends(frontends, { IPv4: iptables }, { IPv4: moved });
  t.is(
    formatDifferences('iptables mode', 'nftables mode', diffs),
    '  TCP 172.30.0.50:80 (nsd/web:http ClusterIP): iptables mode 10.180.0.1:8080 10.180.0.2:8080, nftables mode 10.180.0.3:8080\n' +
      '  TCP 192.168.100.1:30080 (nsd/web:http NodePort): iptables mode 10.180.0.1:8080 10.180.0.2:8080, nftables mode 10.180.0.3:8080\n',
  );
});

test('a family one state could not be read for is a difference, never a match', async (t) => {
  const state = web(['10.180.0.1:8080']);
  const diffs = compareFrontends(frontendsToCheck(state, NODE), {}, { IPv4: await traced('iptables', state) });
  t.deepEqual(diffs.map((d) => d.old), [['NOT READ'], ['NOT READ']]);
});
