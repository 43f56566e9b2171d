/**
 * `drover takeover` away from IPVS mode (kube-proxy's IPVS layout, which
 * drover's IPVS mode writes): the plan (IPVS → nftables built; IPVS →
 * iptables, anything → IPVS, and IPVS state that cannot be read refused
 * before anything changes), the check of every frontend over IPVS mode's and
 * nftables mode's fakes (a frontend whose endpoints differ is named with
 * both sets), and the drain of the layout's own connections on the fake
 * IPVS: a virtual server outside the layout is neither waited for nor
 * counted, and the wait ends at its bound.
 */
import test from 'ava';
import { FakeIpvs } from '../../src/kernel/ipvs/fake.ts';
import { activeConnections, establishedOn, layoutServers, waitForDrain } from '../../src/modes/ipvs/handover.ts';
import { parseIpvsConnections } from '../../src/kernel/ipvs/conn-table.ts';
import { modeDriver } from '../../src/modes/registry.ts';
import { formatPlan, formatSurvey, planTakeover } from '../../src/takeover/plan.ts';
import type { NodeSurvey } from '../../src/takeover/survey.ts';
import { drainText } from '../../src/takeover/takeover.ts';
import { compareFrontends, formatDifferences, frontendsToCheck } from '../../src/takeover/verify.ts';
import { NODE, traced, web } from '../support/takeover.ts';

const title = (m: string) => modeDriver(m).title;

/** A survey of a node kube-proxy's IPVS mode left, read from inside its namespace; `extra` overrides IPVS mode's finding. */
function ipvsNode(extra: Partial<NodeSurvey['modes'][number]> = {}): NodeSurvey {
  return {
    modes: [
      { mode: 'iptables', title: 'iptables', found: [], unread: [] },
      { mode: 'ipvs', title: 'IPVS', found: ['iptables-nft IPv4: 12 chains, 9 hook rules (IPVS layout)', 'link kube-ipvs0', 'ipsets KUBE-CLUSTER-IP', '2 virtual servers, 4 real servers, 8 active connections'], unread: [], ...extra },
      { mode: 'nftables', title: 'nftables', found: [], unread: [] },
    ],
    kubeProxyTables: [],
  };
}

test('IPVS layout to nftables mode: planned, IPVS mode checked then removed; a virtual server outside the layout is printed as left alone', (t) => {
  const s = ipvsNode({ ignored: ['virtual servers outside the layout, left alone: TCP 192.168.50.1:80'] });
  const plan = planTakeover(s, 'nftables', false);
  t.is(plan.refusal, undefined);
  t.deepEqual(plan.remove.map((m) => m.mode), ['ipvs']);
  t.is(
    formatSurvey(s) + formatPlan(plan, title),
    'found:\n' +
      '  iptables mode: nothing\n' +
      '  IPVS mode: iptables-nft IPv4: 12 chains, 9 hook rules (IPVS layout); link kube-ipvs0; ipsets KUBE-CLUSTER-IP; 2 virtual servers, 4 real servers, 8 active connections\n' +
      '    virtual servers outside the layout, left alone: TCP 192.168.50.1:80\n' +
      '  nftables mode: nothing\n' +
      '  kube-proxy nftables mode: nothing\n' +
      'plan:\n' +
      '  1. full sync in nftables mode, from nothing\n' +
      '  2. check every frontend: IPVS mode must send it to the same endpoints as nftables mode\n' +
      '  3. remove IPVS mode\n',
  );
});

test('IPVS to iptables mode, and anything to IPVS mode, are refused before anything changes: not built', (t) => {
  t.is(
    planTakeover(ipvsNode(), 'iptables', false).refusal,
    "a takeover from IPVS mode to iptables mode is not built yet (their layouts share nat chains, such as KUBE-SERVICES, so IPVS mode's cleanup would remove iptables mode's); move to nftables mode; nothing was changed",
  );
  t.is(planTakeover(ipvsNode(), 'ipvs', false).refusal, 'a takeover to IPVS mode is not built yet; nothing was changed');
  const iptables: NodeSurvey = { ...ipvsNode(), modes: ipvsNode().modes.map((m) => ({ ...m, found: m.mode === 'iptables' ? ['x'] : [] })) };
  t.is(planTakeover(iptables, 'ipvs', false).refusal, 'a takeover to IPVS mode is not built yet; nothing was changed');
});

test('IPVS state whose virtual servers could not be read (--netns) refuses the takeover, naming why', (t) => {
  const why = "IPVS virtual servers: not read with --netns (netlink reads drover's own network namespace)";
  const plan = planTakeover(ipvsNode({ unread: [why], cannotRemove: `${why}; run drover inside the namespace instead: ip netns exec node1 drover takeover …` }), 'nftables', false);
  t.is(
    plan.refusal,
    `IPVS mode's state cannot be checked and removed from here: ${why}; run drover inside the namespace instead: ip netns exec node1 drover takeover …; nothing was changed`,
  );
  // Without IPVS state, the unread virtual servers refuse nothing.
  const none: NodeSurvey = { ...ipvsNode(), modes: ipvsNode().modes.map((m) => (m.mode === 'ipvs' ? { ...m, found: [], unread: [why], cannotRemove: why } : m)) };
  t.is(planTakeover(none, 'nftables', false).refusal, undefined);
});

test('the check: IPVS and nftables mode programmed from one snapshot agree on every frontend; a frontend whose endpoints differ is named with both sets', async (t) => {
  const state = web(['10.180.0.1:8080', '10.180.0.2:8080']);
  const frontends = frontendsToCheck(state, NODE);
  const ipvs = await traced('ipvs', state);
  t.deepEqual(compareFrontends(frontends, { IPv4: ipvs }, { IPv4: await traced('nftables', state) }), []);
  const diffs = compareFrontends(frontends, { IPv4: ipvs }, { IPv4: await traced('nftables', web(['10.180.0.3:8080'])) });
  t.is(
    formatDifferences('IPVS mode', 'nftables mode', diffs),
    '  TCP 172.30.0.50:80 (nsd/web:http ClusterIP): IPVS mode 10.180.0.1:8080 10.180.0.2:8080, nftables mode 10.180.0.3:8080\n' +
      '  TCP 192.168.100.1:30080 (nsd/web:http NodePort): IPVS mode 10.180.0.1:8080 10.180.0.2:8080, nftables mode 10.180.0.3:8080\n',
  );
});

const rs = (address: string, weight = 1) => ({ address, port: 8080, weight, forwarding: 'masq' as const });

test("the layout's virtual servers and their active connections; one outside the layout is neither counted nor waited for", async (t) => {
  const ipvs = new FakeIpvs();
  const cluster = { protocol: 'TCP' as const, address: '10.96.0.10', port: 80, scheduler: 'rr' };
  const nodePort = { protocol: 'TCP' as const, address: '192.168.100.1', port: 30080, scheduler: 'rr' };
  const foreign = { protocol: 'TCP' as const, address: '192.168.50.1', port: 80, scheduler: 'rr' };
  for (const vs of [cluster, nodePort, foreign]) {
    await ipvs.newService(vs);
    await ipvs.newDest(vs, rs('10.244.1.2'));
    ipvs.setConns(vs, rs('10.244.1.2'), 3, 1);
  }
  const scope = { serviceCIDR: '10.96.0.0/12', bound: new Set(['10.96.0.10']), host: new Set(['192.168.100.1']) };
  const servers = await layoutServers(ipvs, scope);
  t.deepEqual(servers.layout.map((v) => `${v.entry.address}:${v.entry.port}`).sort(), ['10.96.0.10:80', '192.168.100.1:30080']);
  t.deepEqual(servers.foreign, ['TCP 192.168.50.1:80']);
  t.is(activeConnections(servers.layout), 6, 'active connections only, of the layout only');
  // Drained once the layout's connections end, whatever the foreign one holds.
  let polls = 0;
  let clock = 0;
  const fake = { now: () => clock, sleep: async (ms: number) => void (clock += ms) };
  const report = await waitForDrain(async () => {
    if (++polls === 3) for (const vs of [cluster, nodePort]) ipvs.setConns(vs, rs('10.244.1.2'), 0, 1);
    return activeConnections((await layoutServers(ipvs, scope)).layout);
  }, 30_000, 250, fake);
  t.deepEqual(report, { connections: 6, left: 0, ms: 500 });
  t.is(drainText('IPVS', report), "IPVS mode's 6 established connections ended in 500 ms\n");
});

test('the drain ends at its bound with the connections still open, and says it cuts them', async (t) => {
  let clock = 0;
  const report = await waitForDrain(async () => 2, 1000, 300, { now: () => clock, sleep: async (ms) => void (clock += ms) });
  t.deepEqual(report, { connections: 2, left: 2, ms: 1000 });
  t.is(drainText('IPVS', report), 'IPVS mode still held 2 established connections after 1000 ms, the bound (2 when the wait began): removing its state cuts those still open\n');
  t.deepEqual(await waitForDrain(async () => 0, 1000, 300, { now: () => clock, sleep: async () => t.fail('no wait when nothing is open') }), { connections: 0, left: 0, ms: 0 });
  t.is(drainText('IPVS', { connections: 0, left: 0, ms: 0 }), 'IPVS mode held no established connection of its own\n');
});

test("IPVS's connection table read as the kernel prints it; the drain counts its ESTABLISHED entries of the layout only, not SYN_SENT", async (t) => {
  // ip_vs_conn_seq_show: addresses in hex (IPv4) or %pI6, ports in hex.
  const table = [
    'Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData',
    'TCP C0A86402 9D4C 0A60000A 0050 0AF40102 1F90 ESTABLISHED      899',
    'TCP C0A86402 E3DC 0A60000A 0050 0AF40102 1F90 SYN_SENT         113',
    'TCP C0A86402 B94A C0A86401 7560 0AF40102 1F90 ESTABLISHED      899',
    'TCP C0A86402 B94C C0A83201 0050 0AF40102 1F90 ESTABLISHED      899',
    'TCP C0A86402 8A22 0A60000A 0050 0AF40102 1F90 TIME_WAIT        119',
    'UDP C0A86402 D431 0A60000A 0035 0AF40102 0035 UDP              299',
    'TCP fd00:0100:0000:0000:0000:0000:0000:0002 9D4E fd00:0010:0096:0000:0000:0000:0000:000a 0050 fd00:0244:0000:0000:0000:0000:0000:0002 1F90 ESTABLISHED      899',
    'not a line of the table',
    '',
  ].join('\n');
  const conns = parseIpvsConnections(table);
  t.deepEqual(conns.map((c) => `${c.protocol} ${c.virtualAddress} ${c.virtualPort} ${c.state}`), [
    'TCP 10.96.0.10 80 ESTABLISHED',
    'TCP 10.96.0.10 80 SYN_SENT',
    'TCP 192.168.100.1 30048 ESTABLISHED',
    'TCP 192.168.50.1 80 ESTABLISHED',
    'TCP 10.96.0.10 80 TIME_WAIT',
    'UDP 10.96.0.10 53 UDP',
    'TCP fd00:10:96::a 80 ESTABLISHED',
  ]);
  const ipvs = new FakeIpvs();
  for (const vs of [
    { protocol: 'TCP' as const, address: '10.96.0.10', port: 80, scheduler: 'rr' },
    { protocol: 'TCP' as const, address: '192.168.100.1', port: 30048, scheduler: 'rr' },
    { protocol: 'TCP' as const, address: 'fd00:10:96::a', port: 80, scheduler: 'rr' },
    { protocol: 'TCP' as const, address: '192.168.50.1', port: 80, scheduler: 'rr' },
  ]) await ipvs.newService(vs);
  const scope = { serviceCIDR: '10.96.0.0/12', bound: new Set(['10.96.0.10', 'fd00:10:96::a']), host: new Set(['192.168.100.1']) };
  const { layout } = await layoutServers(ipvs, scope);
  t.is(establishedOn(conns, layout), 3, "the ClusterIP's, the NodePort's and the IPv6 one; not SYN_SENT, TIME_WAIT, or the other program's virtual server");
});
