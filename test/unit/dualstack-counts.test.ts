/**
 * What the proxier and iptables mode count and keep of a dual-stack
 * snapshot: a dual-stack service port counts once in a sync's result, a
 * single-stack IPv6 one counts in the change counters, gets its health
 * check, is applied (not held) on an incomplete read, and keeps its stale
 * UDP flows for cleanup on an incomplete read.
 */
import test from 'ava';
import type { ConntrackExec } from '../../src/conntrack/exec.ts';
import type { StaleFlow } from '../../src/conntrack/stale.ts';
import { healthCheckServices } from '../../src/model/health-check.ts';
import type { Endpoint, Frontends, ServicePort } from '../../src/model/types.ts';
import { DualStackIptablesBackend } from '../../src/modes/iptables/dual-stack.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { loadStatic6Rules, loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { countChanges } from '../../src/proxier/changes.ts';
import { Proxier } from '../../src/proxier/proxier.ts';
import type { SourceRead } from '../../src/sources/source.ts';
import { silentLogger } from '../../src/util/log.ts';
import { RecordingBackend } from '../support/recording-backend.ts';
import { dualSnap, ep, snap, sp } from '../support/snapshots.ts';
import { buildFrom } from './model-helpers.ts';

const NODE = { name: 'node-a', addresses: [] };
const local = (target: string, extra: Partial<Endpoint> = {}) => ep(target, { nodeName: 'node-a', ...extra });

/** Frontends with the ClusterIPs given, IPv6 ones by their colon. */
function frontends(ips: string[], extra: Partial<Frontends> = {}): Frontends {
  return {
    clusterIPs: ips.map((ip) => ({ family: ip.includes(':') ? ('IPv6' as const) : ('IPv4' as const), ip })),
    externalIPs: [],
    loadBalancerIngress: [],
    loadBalancerSourceRanges: [],
    ...extra,
  };
}

/** The single-stack IPv6 service port ns/v6:dns (UDP) with `endpoints`. */
const v6only = (endpoints: Endpoint[], extra: Partial<ServicePort> = {}) =>
  sp('ns/v6:dns', 'fd00:96::20', 53, endpoints, { protocol: 'UDP', frontends: frontends(['fd00:96::20']), ...extra });

test('a sync of the dual-stack fixture counts each service port once, a dual-stack one too', async (t) => {
  const { snapshot } = await buildFrom(['test/fixtures/dualstack/services.yaml']);
  const backend = new DualStackIptablesBackend({
    IPv4: { exec: new FakeIptables(), render: { masqueradeAll: false }, statics: loadStaticRules() },
    IPv6: { exec: new FakeIptables(), render: { masqueradeAll: false, family: 'IPv6' }, statics: loadStatic6Rules() },
    logger: silentLogger(),
  });
  const result = await backend.sync(snapshot, { full: true, changed: new Set() });
  // default/web (both families), default/v6only (IPv6), default/empty (both families).
  t.is(result.services, 3);
  // web: 2 IPv4 and 2 IPv6 endpoints; v6only: 1.
  t.is(result.endpoints, 5);
});

test('countChanges counts a single-stack IPv6 service port: added, its endpoints changed, removed', (t) => {
  const one = dualSnap([], [v6only([ep('[fd00:244:1::4]:53')])]);
  const two = dualSnap([], [v6only([ep('[fd00:244:1::4]:53'), ep('[fd00:244:1::5]:53')])]);
  t.deepEqual(countChanges(undefined, one, ['ns/v6:dns']), { services: 1, endpoints: 1 });
  t.deepEqual(countChanges(one, two, ['ns/v6:dns']), { services: 0, endpoints: 1 });
  t.deepEqual(countChanges(two, snap(), ['ns/v6:dns']), { services: 1, endpoints: 1 });
  t.deepEqual(countChanges(two, two, ['ns/v6:dns']), { services: 0, endpoints: 0 });
  // A dual-stack service port whose IPv6 half alone changes its endpoints.
  const dual = (eps6: string[]) =>
    dualSnap([sp('ns/d:dns', '10.96.0.10', 53, [ep('10.244.1.2:53')], { frontends: frontends(['10.96.0.10', 'fd00:96::10']) })], [
      sp('ns/d:dns', 'fd00:96::10', 53, eps6.map((e) => ep(e)), { frontends: frontends(['10.96.0.10', 'fd00:96::10']) }),
    ]);
  t.deepEqual(countChanges(dual(['[fd00:244:1::2]:53']), dual([]), ['ns/d:dns']), { services: 0, endpoints: 1 });
});

test('a single-stack IPv6 LoadBalancer Service with externalTrafficPolicy Local gets its health check, counting its IPv6 endpoints; a dual-stack one counts its IPv4 ones', (t) => {
  const lb = { type: 'LoadBalancer' as const, externalTrafficPolicy: 'Local' as const };
  const v6 = v6only([local('[fd00:244:1::4]:53'), local('[fd00:244:1::5]:53'), ep('[fd00:244:2::4]:53', { nodeName: 'node-b' })], {
    ...lb,
    frontends: frontends(['fd00:96::20'], { nodePort: 30053, healthCheckNodePort: 32001 }),
  });
  const dualFrontends = frontends(['10.96.0.10', 'fd00:96::10'], { nodePort: 30080, healthCheckNodePort: 32002 });
  const dual4 = sp('ns/d:http', '10.96.0.10', 80, [local('10.244.1.2:80')], { ...lb, frontends: dualFrontends });
  const dual6 = sp('ns/d:http', 'fd00:96::10', 80, [local('[fd00:244:1::2]:80'), local('[fd00:244:1::3]:80')], { ...lb, frontends: dualFrontends });
  const services = healthCheckServices({ ...dualSnap([dual4], [dual6, v6]), node: NODE });
  t.deepEqual([...services], [
    ['ns/d', { namespace: 'ns', name: 'd', port: 32002, localEndpoints: 1 }],
    ['ns/v6', { namespace: 'ns', name: 'v6', port: 32001, localEndpoints: 2 }],
  ]);
});

/** A proxier on `reads` with a recording backend and a conntrack that records the flows it is asked to delete. */
function setup(reads: SourceRead[]) {
  const backend = new RecordingBackend();
  const deleted: StaleFlow[] = [];
  const conntrack: ConntrackExec = { deleteUDP: async (flow) => (deleted.push(flow), 1) };
  let i = 0;
  const source = { load: async () => reads[Math.min(i++, reads.length - 1)]!, watch: () => {}, close: () => {} };
  const proxier = new Proxier({ source, backend, conntrack, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  return { backend, proxier, deleted };
}

test('on an incomplete read, a reported change of a single-stack IPv6 service port is applied, not held, and its stale UDP flows are deleted', async (t) => {
  const broken = ['f.yaml: syntax error; file skipped'];
  const { backend, proxier, deleted } = setup([
    { snapshot: dualSnap([], [v6only([ep('[fd00:244:1::4]:53'), ep('[fd00:244:1::5]:53')])]) },
    { snapshot: dualSnap([], [v6only([ep('[fd00:244:1::4]:53')])]), incomplete: broken, changed: new Set(['ns/v6:dns']) },
  ]);
  await proxier.syncOnce();
  await proxier.syncOnce();
  t.deepEqual(backend.calls[1], { services: [], full: false, changed: ['ns/v6:dns'], incomplete: true });
  t.deepEqual(deleted, [{ family: 'IPv6', ip: 'fd00:96::20', port: 53, endpointIP: 'fd00:244:1::5' }]);
});
