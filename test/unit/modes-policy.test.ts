/**
 * The endpoint-policy table (model/policy.ts, after kube-proxy's
 * pkg/proxy/topology.go CategorizeEndpoints): which endpoints a connection
 * to a ClusterIP from a pod reaches, by topology hints, traffic policy and
 * the endpoints' ready/serving/terminating conditions, with the snapshot's
 * node. Every mode of the registry runs it on its fakes (ModeDriver.fake):
 * a full sync, then the connection traced through what the fakes hold.
 */
import test from 'ava';
import { trace } from '../../src/inspect/trace.ts';
import { countServingEndpoints } from '../../src/model/policy.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { allModes } from '../../src/modes/registry.ts';
import { reachedOf } from '../support/packet-flow.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const CLUSTER_CIDR = '10.244.0.0/16';
/** A pod on the node: inside the cluster CIDR, so never masqueraded. */
const POD = '10.244.9.2';
const terminating = { ready: false, serving: true, terminating: true } as const;
const gone = { ready: false, serving: false, terminating: true } as const;

/** The Services of the table, one per behaviour; ClusterIP 10.96.0.<n>, port 80. */
const SERVICES = [
  // Zone hints: zone-a .1, zone-b .2.
  sp('ns/zoned', '10.96.0.1', 80, [ep('10.1.0.1:80', { zoneHints: ['zone-a'] }), ep('10.1.0.2:80', { zoneHints: ['zone-b'] })]),
  // No ready endpoint: the serving-terminating one serves, the one that is not serving does not.
  sp('ns/ending', '10.96.0.2', 80, [ep('10.1.0.3:80', terminating), ep('10.1.0.4:80', gone)]),
  // A ready endpoint and a serving-terminating one: only the ready one.
  sp('ns/mixed', '10.96.0.3', 80, [ep('10.1.0.5:80'), ep('10.1.0.6:80', terminating)]),
  // No endpoint serves at all.
  sp('ns/none-serving', '10.96.0.4', 80, [ep('10.1.0.7:80', gone)]),
  // Hints, but one endpoint has none: the hints are ignored.
  sp('ns/half-hinted', '10.96.0.5', 80, [ep('10.1.0.8:80', { zoneHints: ['zone-b'] }), ep('10.1.0.9:80')]),
  // internalTrafficPolicy Local: this node's endpoint (n1) and another's.
  sp('ns/itp', '10.96.0.6', 80, [ep('10.1.0.10:80', { nodeName: 'n1' }), ep('10.1.0.11:80', { nodeName: 'n2' })], { internalTrafficPolicy: 'Local' }),
  // externalTrafficPolicy Local does not narrow the ClusterIP.
  sp('ns/etp', '10.96.0.7', 80, [ep('10.1.0.12:80', { nodeName: 'n1' }), ep('10.1.0.13:80', { nodeName: 'n2' })], { externalTrafficPolicy: 'Local' }),
];

/** The snapshot with `node` (absent: the snapshot names no node). */
function snapshot(node: Snapshot['node']): Snapshot {
  const s = snap(...SERVICES);
  return node === undefined ? s : { ...s, node };
}

interface PolicyCase {
  readonly what: string;
  readonly node: Snapshot['node'];
  readonly clusterIP: string;
  /** The endpoints reached ("ip:port"); empty: the connection is refused. */
  readonly reach: readonly string[];
}

const inZone = (zone: string) => ({ name: 'n1', zone, addresses: [] });

const CASES: readonly PolicyCase[] = [
  { what: 'zone hints apply when the snapshot has a node in a hinted zone', node: inZone('zone-b'), clusterIP: '10.96.0.1', reach: ['10.1.0.2:80'] },
  { what: 'zone hints are ignored when the snapshot has no node', node: undefined, clusterIP: '10.96.0.1', reach: ['10.1.0.1:80', '10.1.0.2:80'] },
  { what: "zone hints are ignored when no endpoint is hinted to the node's zone", node: inZone('zone-c'), clusterIP: '10.96.0.1', reach: ['10.1.0.1:80', '10.1.0.2:80'] },
  { what: 'zone hints are ignored when an endpoint has none', node: inZone('zone-b'), clusterIP: '10.96.0.5', reach: ['10.1.0.8:80', '10.1.0.9:80'] },
  { what: 'with no ready endpoint, serving-terminating ones are programmed', node: undefined, clusterIP: '10.96.0.2', reach: ['10.1.0.3:80'] },
  { what: 'with a ready endpoint, serving-terminating ones are not', node: undefined, clusterIP: '10.96.0.3', reach: ['10.1.0.5:80'] },
  { what: 'with no serving endpoint, the ClusterIP is refused', node: undefined, clusterIP: '10.96.0.4', reach: [] },
  { what: "internalTrafficPolicy Local: only this node's endpoint", node: inZone('zone-a'), clusterIP: '10.96.0.6', reach: ['10.1.0.10:80'] },
  { what: 'externalTrafficPolicy Local: the ClusterIP reaches every endpoint', node: inZone('zone-a'), clusterIP: '10.96.0.7', reach: ['10.1.0.12:80', '10.1.0.13:80'] },
];

/** What the connection from {@link POD} to `clusterIP`:80 reaches in each mode, after a full sync of `s` on its fakes: sorted "ip:port", or the refusing verdict. */
async function reachedByMode(s: Snapshot, clusterIP: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const mode of allModes()) {
    const fake = await mode.fake({ render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, nodeAddresses: ['192.168.100.1'] });
    await fake.backend.sync(s, { full: true, changed: new Set() });
    out.set(mode.name, reachedOf(trace(await fake.trace(), { src: POD, dst: clusterIP, dport: 80, proto: 'tcp' }).outcomes));
  }
  return out;
}

for (const c of CASES) {
  test(`${c.what}, in every mode`, async (t) => {
    const reached = await reachedByMode(snapshot(c.node), c.clusterIP);
    const want = c.reach.length > 0 ? [...c.reach].sort() : ['reject'];
    for (const [mode, got] of reached) t.deepEqual(got, want, `${mode} mode`);
    t.is(reached.size, allModes().length);
  });
}

test('with no ready endpoint, serving-terminating ones are counted; the count is of what ClusterIP traffic reaches', (t) => {
  // Without a node: zoned 2, ending 1, mixed 1, none-serving 0, half-hinted 2, itp 0 (no endpoint is this node's), etp 2.
  t.is(countServingEndpoints(snapshot(undefined)), 8);
  // On n1 in zone-b: zoned 1 (its hint), itp 1.
  t.is(countServingEndpoints(snapshot(inZone('zone-b'))), 8);
});
