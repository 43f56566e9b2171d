/**
 * `--nodeport-localhost` (src/modes/iptables/localhost.ts): the exact
 * static rules with and without it and with `--nodeport-addresses`, when
 * the flag takes effect, the route_localnet record and its restore (a
 * stale record of an earlier namespace, an IPv6 failure), cleanup of a
 * KUBE-FIREWALL others jump to, the flag in the other modes (the configuration file: config-file.test.ts).
 */
import test from 'ava';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildProgram } from '../../src/cli/program.ts';
import { netnsArg, nodePortAddressesArg } from '../../src/cli/options.ts';
import { keptChainLines } from '../../src/cli/cleanup.ts';
import { refuseForeignSwitches } from '../../src/cli/setup.ts';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { ensureRouteLocalnet, hasLocalnetFirewallJump, recordPath, restoreRouteLocalnet, ROUTE_LOCALNET, RouteLocalnetBackend } from '../../src/modes/iptables/localhost.ts';
import { localhostNodePortsOn, LOCALNET_FIREWALL_RULE } from '../../src/modes/shared/kube-chains/localnet.ts';
import { FamilySyncError } from '../../src/modes/shared/dual-stack.ts';
import type { Backend } from '../../src/proxier/backend.ts';
import { nodePortIPs } from '../../src/modes/shared/kube-chains/node-ports.ts';
import { renderRestore } from '../../src/modes/iptables/snapshot.ts';
import { loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { FakeSysctls } from '../../src/modes/ipvs/fake.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { ipv4Frontends } from '../../src/model/types.ts';
import { iptablesMode } from '../../src/modes/iptables/driver.ts';
import { buildFrom } from './model-helpers.ts';

const render = { clusterCIDR: '10.0.0.0/8', masqueradeAll: false };
const STATE = snap(sp('default/web:http', '172.30.0.10', 80, [ep('10.1.1.2:8080')], { type: 'NodePort', frontends: ipv4Frontends('172.30.0.10', 30080) }));

/** The hook and KUBE-FIREWALL lines of a render: what the flag changes. */
function hookLines(text: string): string[] {
  return text.split('\n').filter((l) => /^-I |KUBE-FIREWALL/.test(l));
}

const FIREWALL = [
  ':KUBE-FIREWALL - [0:0]',
  '-I INPUT 1 -m comment --comment "block incoming localnet connections" -j KUBE-FIREWALL',
  '-I OUTPUT 1 -m comment --comment "block incoming localnet connections" -j KUBE-FIREWALL',
  '-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
];

const FILTER_HOOKS = [
  '-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  '-I INPUT 1 -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS',
  '-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
  '-I FORWARD 1 -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
  '-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  '-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
  '-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
];

const NODEPORTS = '-m comment --comment "kubernetes service nodeports"';
const ALL_BUT_LOOPBACK = `! -d 127.0.0.0/8 ${NODEPORTS} -m addrtype --dst-type LOCAL`;
const ALL_LOCAL = `${NODEPORTS} -m addrtype --dst-type LOCAL`;
const at = (ip: string) => `-d ${ip}/32 ${NODEPORTS}`;

/** The expected hook lines: nat's with the nodeports hooks of `nodeports` (their matches, in chain order), then filter's, with KUBE-FIREWALL when `firewall`. */
function expected(nodeports: string[], firewall: boolean): string[] {
  const np = (chain: string) => [...nodeports].reverse().map((m) => `-I ${chain} 1 ${m} -j KUBE-NODEPORTS`);
  const nat = [
    ...np('PREROUTING'),
    '-I PREROUTING 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    ...np('OUTPUT'),
    '-I OUTPUT 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-I POSTROUTING 1 -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
  ];
  const filter = firewall ? [FIREWALL[0]!, FIREWALL[1]!, ...FILTER_HOOKS.slice(0, 8), FIREWALL[2]!, ...FILTER_HOOKS.slice(8), FIREWALL[3]!] : FILTER_HOOKS;
  return [...nat, ...filter];
}

/** The static rules of iptablesStatics for `cidrs` among `local`, as the driver makes them. */
function statics(flag: boolean, cidrs: string | undefined, local: string[] = ['127.0.0.1', '10.1.0.5', '192.168.7.1']) {
  const parsed = cidrs === undefined ? undefined : nodePortAddressesArg(cidrs);
  const on = localhostNodePortsOn(flag, parsed);
  return loadStaticRules(parsed === undefined ? undefined : nodePortIPs(parsed, local, 'IPv4', on).ips, on);
}

test('render without the flag: the nodeports hooks keep 127.0.0.0/8 out, no KUBE-FIREWALL', (t) => {
  const text = renderRestore(STATE, render, [], statics(false, undefined));
  t.deepEqual(hookLines(text), expected([ALL_BUT_LOOPBACK], false));
});

test('render with the flag: the nodeports hooks take 127.0.0.0/8, and KUBE-FIREWALL drops martians to it, jumped to from INPUT and OUTPUT', (t) => {
  const text = renderRestore(STATE, render, [], statics(true, undefined));
  t.deepEqual(hookLines(text), expected([ALL_LOCAL], true));
  t.is(LOCALNET_FIREWALL_RULE, FIREWALL[3]!.replace('-A KUBE-FIREWALL ', ''));
  // The service's rules are the same: localhost packets are masqueraded by its KUBE-EXT chain, as every NodePort packet.
  const plain = renderRestore(STATE, render, [], statics(false, undefined));
  const services = (s: string) => s.split('\n').filter((l) => /^-A KUBE-(NODEPORTS|EXT|SVC|SEP|SERVICES)/.test(l));
  t.deepEqual(services(text), services(plain));
  t.true(text.includes('-A KUBE-EXT-'));
});

test('--nodeport-addresses that excludes 127.0.0.0/8: the flag does nothing (no loopback hook, no KUBE-FIREWALL), as kube-proxy', (t) => {
  t.false(localhostNodePortsOn(true, nodePortAddressesArg('10.0.0.0/8,fd00::/64')));
  const text = renderRestore(STATE, render, [], statics(true, '10.0.0.0/8'));
  t.deepEqual(hookLines(text), expected([at('10.1.0.5')], false));
});

test('--nodeport-addresses that holds 127.0.0.0/8: with the flag, one hook for 127.0.0.1 too and KUBE-FIREWALL; without it, 127.0.0.1 is left out', (t) => {
  for (const cidrs of ['127.0.0.0/8,10.0.0.0/8', '127.0.0.1/32,10.0.0.0/8', '0.0.0.0/0']) t.true(localhostNodePortsOn(true, nodePortAddressesArg(cidrs)), cidrs);
  t.false(localhostNodePortsOn(false, undefined));
  t.true(localhostNodePortsOn(true, nodePortAddressesArg('fd00::/64')), 'only IPv6 CIDRs: every IPv4 address');
  const on = renderRestore(STATE, render, [], statics(true, '127.0.0.0/8,10.0.0.0/8'));
  t.deepEqual(hookLines(on), expected([at('10.1.0.5'), at('127.0.0.1')], true));
  const off = renderRestore(STATE, render, [], statics(false, '127.0.0.0/8,10.0.0.0/8'));
  t.deepEqual(hookLines(off), expected([at('10.1.0.5')], false));
});

test('a sync turns the flag on and off in place (the hooks swap by identity), and cleanup of the widest rules leaves nothing', async (t) => {
  const fake = new FakeIptables();
  const sync = (flag: boolean) => new IptablesBackend({ exec: fake, render, logger: silentLogger(), statics: statics(flag, undefined) }).sync(STATE, { full: true, changed: new Set() });
  await sync(true);
  t.deepEqual(fake.chain('filter', 'KUBE-FIREWALL'), [LOCALNET_FIREWALL_RULE]);
  t.deepEqual(fake.chain('nat', 'PREROUTING'), [
    '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
  ]);
  t.like(await sync(true), { written: { chain: 0, rule: 0 }, deleted: { chain: 0, rule: 0 } });
  await sync(false);
  t.deepEqual(fake.chain('nat', 'PREROUTING'), [
    '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
  ]);
  // Turned off, the rule stays until cleanup: route_localnet may still be on (localhost.ts).
  t.deepEqual(fake.chain('filter', 'KUBE-FIREWALL'), [LOCALNET_FIREWALL_RULE]);
  await new IptablesBackend({ exec: fake, render, logger: silentLogger(), statics: loadStaticRules(undefined, true) }).cleanup();
  t.notRegex(`${fake.dump('nat')}${fake.dump('filter')}`, /KUBE-/);
});

test('route_localnet: set to 1 with the prior value recorded once; put back only while it is still 1 and the namespace the same', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-localnet-'));
  try {
    const sysctls = new FakeSysctls();
    sysctls.values.set(ROUTE_LOCALNET, '0');
    const place = { netns: undefined, sysctls, dir };
    t.true(await ensureRouteLocalnet(place, silentLogger()));
    t.is(await sysctls.read(ROUTE_LOCALNET), '1');
    t.like(JSON.parse(await readFile(recordPath(undefined, dir), 'utf8')), { netns: null, prior: '0' });
    t.false(await ensureRouteLocalnet(place, silentLogger()), 'already 1: nothing written, the record kept');
    t.is(await restoreRouteLocalnet(place, silentLogger()), '0');
    t.is(await sysctls.read(ROUTE_LOCALNET), '0');
    t.false(existsSync(recordPath(undefined, dir)));
    t.is(await restoreRouteLocalnet(place, silentLogger()), undefined, 'no record: nothing to put back');

    // Someone else changed it since: left alone, the record dropped.
    await ensureRouteLocalnet(place, silentLogger());
    await sysctls.write(ROUTE_LOCALNET, '0');
    t.is(await restoreRouteLocalnet(place, silentLogger()), undefined);
    t.false(existsSync(recordPath(undefined, dir)));

    // A record of another namespace made under the same name (another inode): left alone.
    await ensureRouteLocalnet(place, silentLogger());
    const record = JSON.parse(await readFile(recordPath(undefined, dir), 'utf8')) as { inode: number };
    await writeFile(recordPath(undefined, dir), JSON.stringify({ ...record, inode: record.inode + 1 }));
    t.is(await restoreRouteLocalnet(place, silentLogger()), undefined);
    t.is(await sysctls.read(ROUTE_LOCALNET), '1');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the flag in another mode is a usage error naming the flag and the mode', (t) => {
  t.notThrows(() => refuseForeignSwitches('iptables', { iptables: { nodeportLocalhost: true } }));
  t.notThrows(() => refuseForeignSwitches('nftables', { iptables: { nodeportLocalhost: false } }));
  for (const [mode, title] of [['nftables', 'nftables'], ['ipvs', 'IPVS']] as const) {
    t.throws(() => refuseForeignSwitches(mode, { iptables: { nodeportLocalhost: true } }), {
      message: `--nodeport-localhost is for --mode iptables only: ${title} mode has no NodePorts on 127.0.0.1`,
    });
  }
});

test('render --mode nftables --nodeport-localhost is refused before anything is read', async (t) => {
  const program = buildProgram();
  program.commands.forEach((c) => c.exitOverride());
  await t.throwsAsync(program.parseAsync(['node', 'drover', 'render', '--mode', 'nftables', '--nodeport-localhost', '--source', '/nonexistent']), {
    message: '--nodeport-localhost is for --mode iptables only: nftables mode has no NodePorts on 127.0.0.1',
  });
});

test('IPv6 has no localhost NodePorts: render with the flag changes the IPv4 ruleset only; ::1 stays out', async (t) => {
  const { snapshot } = await buildFrom(['test/fixtures/dualstack/services.yaml']);
  const opts = { source: 'x', masqueradeAll: false, serviceCidr: '10.96.0.0/12', clusterCidr: '10.244.0.0/16,fd00:10:244::/56' };
  const split = (text: string) => text.split('# drover render: ip6tables-restore --noflush input');
  const [v4off, v6off] = split((await iptablesMode.render(snapshot, { render: opts, modes: { iptables: { nodeportLocalhost: false }, nftables: { nodeportLocalhost: true } } }, [])).text);
  const [v4on, v6on] = split((await iptablesMode.render(snapshot, { render: opts, modes: { iptables: { nodeportLocalhost: true } } }, [])).text);
  t.truthy(v6on);
  t.is(v6on, v6off);
  t.true(v6on!.includes('-I PREROUTING 1 ! -d ::1/128 -m comment --comment "kubernetes service nodeports"'));
  t.false(v6on!.includes('KUBE-FIREWALL'));
  t.not(v4on, v4off);
  t.true(v4on!.includes(`-A KUBE-FIREWALL ${LOCALNET_FIREWALL_RULE}`));
});

test("cleanup takes KUBE-FIREWALL only after drover's jump to it: one without its comment is kubelet's or kube-proxy's", (t) => {
  t.true(hasLocalnetFirewallJump('*filter\n-A INPUT -m comment --comment "block incoming localnet connections" -j KUBE-FIREWALL\nCOMMIT\n'));
  t.true(hasLocalnetFirewallJump('-A OUTPUT -m comment --comment "block incoming localnet connections" -j KUBE-FIREWALL'));
  t.false(hasLocalnetFirewallJump('*filter\n-A INPUT -j KUBE-FIREWALL\n-A OUTPUT -j KUBE-FIREWALL\nCOMMIT\n'));
  t.false(hasLocalnetFirewallJump('-A FORWARD -m comment --comment "block incoming localnet connections" -j KUBE-FIREWALL'));
});

test('route_localnet: a record of an earlier namespace of the same name (another inode or st_dev) is replaced at the next start, so cleanup puts the value back', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-localnet-'));
  try {
    const sysctls = new FakeSysctls();
    const place = { netns: undefined, sysctls, dir };
    const { dev, ino } = await stat('/proc/self/ns/net');
    for (const stale of [{ inode: ino + 1, dev }, { inode: ino, dev: dev + 1 }]) {
      // Left by a run killed without cleanup in a namespace since deleted and made again: this one starts at 0.
      await writeFile(recordPath(undefined, dir), JSON.stringify({ netns: null, ...stale, prior: '1' }));
      sysctls.values.set(ROUTE_LOCALNET, '0');
      t.true(await ensureRouteLocalnet(place, silentLogger()));
      t.deepEqual(JSON.parse(await readFile(recordPath(undefined, dir), 'utf8')), { netns: null, inode: ino, dev, prior: '0' });
      t.is(await restoreRouteLocalnet(place, silentLogger()), '0', JSON.stringify(stale));
      t.is(await sysctls.read(ROUTE_LOCALNET), '0');
    }
    // A record of the same inode on another device is another namespace's: left alone.
    sysctls.values.set(ROUTE_LOCALNET, '1');
    await writeFile(recordPath(undefined, dir), JSON.stringify({ netns: null, inode: ino, dev: dev + 1, prior: '0' }));
    t.is(await restoreRouteLocalnet(place, silentLogger()), undefined);
    t.is(await sysctls.read(ROUTE_LOCALNET), '1');
    t.false(existsSync(recordPath(undefined, dir)));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("route_localnet: drover's own namespace has a record file no --netns name can take", (t) => {
  t.is(recordPath(undefined, '/d'), '/d/route_localnet.@self.json');
  t.is(recordPath('self', '/d'), '/d/route_localnet.self.json');
  t.throws(() => netnsArg('@self'));
});

test("cleanup leaves a KUBE-FIREWALL that kubelet's or kube-proxy's jumps still use as it is, anti-martian rule included; drover's jumps go", async (t) => {
  const fake = new FakeIptables();
  await new IptablesBackend({ exec: fake, render, logger: silentLogger(), statics: statics(true, undefined) }).sync(STATE, { full: true, changed: new Set() });
  fake.chain('filter', 'INPUT')!.push('-j KUBE-FIREWALL');
  fake.chain('filter', 'OUTPUT')!.push('-j KUBE-FIREWALL');
  const result = await new IptablesBackend({ exec: fake, render, logger: silentLogger(), statics: loadStaticRules(undefined, true) }).cleanup();
  t.deepEqual(result.kept, [{ table: 'filter', chain: 'KUBE-FIREWALL', referencedBy: ['-A INPUT -j KUBE-FIREWALL', '-A OUTPUT -j KUBE-FIREWALL'], untouched: true }]);
  t.false(fake.restores.at(-1)!.includes(':KUBE-FIREWALL'), 'not declared, so not flushed');
  t.deepEqual(fake.chain('filter', 'KUBE-FIREWALL'), [LOCALNET_FIREWALL_RULE]);
  t.deepEqual(fake.chain('filter', 'INPUT'), ['-j KUBE-FIREWALL']);
  t.deepEqual(fake.chain('filter', 'OUTPUT'), ['-j KUBE-FIREWALL']);
  t.notRegex(fake.dump('filter').replaceAll('KUBE-FIREWALL', ''), /KUBE-/);
  t.notRegex(fake.dump('nat'), /KUBE-/);
  t.is(
    keptChainLines(result.kept[0]!),
    'drover: filter chain KUBE-FIREWALL was left as it is, rules included: a rule drover does not own still jumps to it: -t filter -A INPUT -j KUBE-FIREWALL\n' +
      'drover: filter chain KUBE-FIREWALL was left as it is, rules included: a rule drover does not own still jumps to it: -t filter -A OUTPUT -j KUBE-FIREWALL\n',
  );
});

/** An inner backend whose sync throws `error`. */
function failingBackend(error: Error): Backend {
  return {
    mode: 'iptables',
    sync: () => Promise.reject(error),
    cleanup: () => Promise.resolve({ removed: {}, kept: [] }),
  };
}

test('route_localnet is set after a full sync whose IPv4 family succeeded and IPv6 failed, then the failure is thrown; not when IPv4 failed or the sync was partial', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-localnet-'));
  try {
    const cases = [
      { error: new FamilySyncError([{ family: 'IPv6', error: new Error('no ip6tables') }]), full: true, set: true },
      { error: new FamilySyncError([{ family: 'IPv6', error: new Error('no ip6tables') }]), full: false, set: false },
      { error: new FamilySyncError([{ family: 'IPv4', error: new Error('x') }, { family: 'IPv6', error: new Error('y') }]), full: true, set: false },
      { error: new Error('iptables-restore failed'), full: true, set: false },
    ];
    for (const c of cases) {
      const sysctls = new FakeSysctls();
      sysctls.values.set(ROUTE_LOCALNET, '0');
      const backend = new RouteLocalnetBackend(failingBackend(c.error), { netns: undefined, sysctls, dir }, true, silentLogger());
      const thrown = await t.throwsAsync(backend.sync(STATE, { full: c.full, changed: new Set() }));
      t.is(thrown, c.error);
      t.is(await sysctls.read(ROUTE_LOCALNET), c.set ? '1' : '0', c.error.message);
      await rm(recordPath(undefined, dir), { force: true });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
