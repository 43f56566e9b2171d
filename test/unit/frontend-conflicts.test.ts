/**
 * Frontends two service ports want, handed to every registered mode in a
 * Snapshot the model's claims (model/claims.ts) have not settled: each mode
 * serves the frontend for the same owner (model/frontend-index.ts), drops
 * the same losers' frontends, and warns with the same lines, in its sync
 * log and in `render`. Each mode syncs onto its fakes, and its trace engine
 * walks a client's connection to every frontend through what it wrote.
 * (Clashes the model settles are model-claims.test.ts's; nftables mode's
 * partial syncs of clashes are nft-conflicts.test.ts's.)
 */
import test from 'ava';
import { pino, type Logger } from 'pino';
import { trace, type TraceContext } from '../../src/inspect/trace.ts';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { readTables } from '../../src/kernel/iptables/live.ts';
import { iptablesTraceContext } from '../../src/modes/shared/kube-chains/trace.ts';
import { readIpvsLive } from '../../src/modes/ipvs/live.ts';
import { ipvsTraceContext } from '../../src/modes/ipvs/trace.ts';
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import { nftTraceContext } from '../../src/modes/nftables/trace.ts';
import { allModes } from '../../src/modes/registry.ts';
import { ipv4Frontends, type Frontends, type ServicePort, type Snapshot } from '../../src/model/types.ts';
import type { ChangeSet } from '../../src/proxier/backend.ts';
import { World } from '../support/ipvs-world.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const RENDER = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };
const NODE_IP = '192.168.1.1';
const CLIENT = '192.168.100.2';
const FULL = { full: true, changed: new Set<string>() };

/** A service port `ns/name:http` at `clusterIP`:80 with one endpoint `endpoint`:8080 and the frontends `extra`. */
function port(name: string, clusterIP: string, endpoint: string, extra: Partial<Frontends> = {}, type: ServicePort['type'] = 'ClusterIP'): ServicePort {
  return sp(`default/${name}:http`, clusterIP, 80, [ep(`${endpoint}:8080`)], { type, frontends: { ...ipv4Frontends(clusterIP), ...extra } });
}

const STATE = snap(
  // Two service ports on one ClusterIP:port: a keeps it, b is left out.
  port('a', '10.96.0.10', '10.244.1.1'),
  port('b', '10.96.0.10', '10.244.1.2'),
  // One NodePort twice: np1 keeps it, np2 is served without it.
  port('np1', '10.96.0.20', '10.244.2.1', { nodePort: 30080 }, 'NodePort'),
  port('np2', '10.96.0.21', '10.244.2.2', { nodePort: 30080 }, 'NodePort'),
  // An external IP that is np1's ClusterIP: the ClusterIP goes first.
  port('ext', '10.96.0.30', '10.244.3.1', { externalIPs: [{ family: 'IPv4', ip: '10.96.0.20' }] }),
  // One external IP claimed twice: x1 keeps it.
  port('x1', '10.96.0.40', '10.244.4.1', { externalIPs: [{ family: 'IPv4', ip: '192.0.2.50' }] }),
  port('x2', '10.96.0.41', '10.244.4.2', { externalIPs: [{ family: 'IPv4', ip: '192.0.2.50' }] }),
  // A LoadBalancer IP that is another Service's external IP: lb keeps it (first by name).
  port('lb', '10.96.0.50', '10.244.5.1', { loadBalancerIngress: [{ family: 'IPv4', ip: '192.0.2.60', ipMode: 'VIP' }] }, 'LoadBalancer'),
  port('y', '10.96.0.60', '10.244.6.1', { externalIPs: [{ family: 'IPv4', ip: '192.0.2.60' }] }),
);

/** The same lines in every mode. */
const WARNINGS = [
  'service port default/b:http: ClusterIP 10.96.0.10:80/TCP belongs to service port default/a:http; service port left out',
  'service port default/ext:http: external IP 10.96.0.20:80/TCP belongs to service port default/np1:http; not served there',
  'service port default/np2:http: NodePort *:30080/TCP belongs to service port default/np1:http; not served there',
  'service port default/x2:http: external IP 192.0.2.50:80/TCP belongs to service port default/x1:http; not served there',
  'service port default/y:http: external IP 192.0.2.60:80/TCP belongs to service port default/lb:http; not served there',
];

/** Each frontend, and the one endpoint a connection to it reaches; a loser's frontend is its winner's. */
const SERVED: ReadonlyArray<readonly [string, number, string]> = [
  ['10.96.0.10', 80, '10.244.1.1:8080'],
  [NODE_IP, 30080, '10.244.2.1:8080'],
  ['10.96.0.20', 80, '10.244.2.1:8080'],
  ['10.96.0.21', 80, '10.244.2.2:8080'],
  ['10.96.0.30', 80, '10.244.3.1:8080'],
  ['192.0.2.50', 80, '10.244.4.1:8080'],
  ['10.96.0.41', 80, '10.244.4.2:8080'],
  ['192.0.2.60', 80, '10.244.5.1:8080'],
  ['10.96.0.60', 80, '10.244.6.1:8080'],
];

/** A logger that keeps the message of every warning. */
function recording(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg as string) });
  return { logger, warnings };
}

/** The syncs of a test: `STATE` at once, or the losers first and the owners added by a partial sync, which must take their frontends over. */
type Syncs = ReadonlyArray<readonly [Snapshot, ChangeSet]>;
const OWNERS = ['a', 'np1', 'x1', 'lb'].map((n) => `default/${n}:http`);
const LOSERS = snap(...[...STATE.services.values()].filter((p) => !OWNERS.includes(p.key)));
const WAYS: Readonly<Record<string, Syncs>> = {
  'one full sync': [[STATE, FULL]],
  'a partial sync adding the owners': [
    [LOSERS, FULL],
    [STATE, { full: false, changed: new Set(OWNERS) }],
  ],
};

/** Run `syncs` in a mode on its fakes; the trace context of what it wrote, and the warnings it logged. */
const TRACED: Readonly<Record<string, (syncs: Syncs) => Promise<{ ctx: TraceContext; warnings: string[] }>>> = {
  async iptables(syncs) {
    const { logger, warnings } = recording();
    const fake = new FakeIptables();
    const backend = new IptablesBackend({ exec: fake, render: RENDER, logger });
    for (const [state, changes] of syncs) await backend.sync(state, changes);
    return { ctx: iptablesTraceContext(await readTables(fake), new Set([NODE_IP])), warnings };
  },
  async ipvs(syncs) {
    const { logger, warnings } = recording();
    const world = new World();
    const backend = world.backend({ logger, nodeAddresses: { nodePortIPs: [NODE_IP], hostAddresses: [NODE_IP] } });
    for (const [state, changes] of syncs) await backend.sync(state, changes);
    const live = await readIpvsLive(world, { tables: true });
    return { ctx: ipvsTraceContext(live, new Set([NODE_IP, ...(live.bound ?? []).map((a) => a.address)])), warnings };
  },
  async nftables(syncs) {
    const { logger, warnings } = recording();
    const fake = new FakeNft();
    const backend = new NftablesBackend({ nft: fake, elements: fake.writer(), render: RENDER, frontends: { nodePortIPs: [NODE_IP] }, logger });
    for (const [state, changes] of syncs) await backend.sync(state, changes);
    return { ctx: nftTraceContext(await fake.list(), new Set([NODE_IP])).ctx, warnings };
  },
};

for (const mode of allModes()) {
  for (const [way, syncs] of Object.entries(WAYS)) {
    test(`${mode.name} mode, ${way}: every clashing frontend is served for the same owner, with the same warnings`, async (t) => {
      const traced = TRACED[mode.name];
      if (traced === undefined) return t.fail(`no fakes set up for mode ${mode.name}: add it to TRACED`);
      const { ctx, warnings } = await traced(syncs);
      for (const [dst, dport, endpoint] of SERVED) {
        const reached = trace(ctx, { src: CLIENT, dst, dport, proto: 'tcp' }).outcomes.map((o) => (o.verdict.kind === 'dnat' ? `${o.verdict.ip}:${o.verdict.port}` : o.verdict.kind));
        t.deepEqual(reached, [endpoint], `${mode.name}: ${dst}:${dport}`);
      }
      t.deepEqual(warnings, WARNINGS, `${mode.name}: the sync's warnings`);
    });
  }

  test(`${mode.name} mode: render lists the same refusals and leaves out the service port whose ClusterIP is taken`, async (t) => {
    const rendered = await mode.render(STATE, { render: { source: 'test', masqueradeAll: false, clusterCidr: RENDER.clusterCIDR, serviceCidr: '10.96.0.0/12' }, modes: {} }, []);
    t.deepEqual(rendered.leftOut, WARNINGS);
    t.false(rendered.text.includes('10.244.1.2'), 'the endpoint of default/b is not written');
    t.true(rendered.text.includes('10.244.1.1'));
  });
}
