import test from 'ava';
import { readFileSync } from 'node:fs';
import { categorizeEndpoints, clusterEndpoints, countServingEndpoints, externallyAccessible, internalEndpoints, ServingEndpointCount, topologyMode } from '../../src/model/policy.ts';
import type { Endpoint, NodeInfo, TrafficPolicy } from '../../src/model/types.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

/** One case of test/fixtures/policy/categorize-endpoints.json (its "about" describes the format). */
interface Case {
  readonly name: string;
  readonly source?: string;
  readonly zone?: string;
  readonly noNode?: boolean;
  readonly service: { readonly itp?: TrafficPolicy; readonly etp?: TrafficPolicy; readonly nodePort?: number };
  readonly endpoints: readonly string[];
  readonly cluster: readonly string[] | null;
  readonly local: readonly string[] | null;
  readonly all?: readonly string[];
  readonly onlyRemote?: boolean;
}

const CASES: readonly Case[] = JSON.parse(readFileSync('test/fixtures/policy/categorize-endpoints.json', 'utf8')).cases;
const THIS_NODE = 'this-node';

/** "10.0.0.1:80 r s t L z=a,b n=x" → an Endpoint; flags absent are false (as kube-proxy's test BaseEndpointInfo). */
function endpoint(spec: string): Endpoint {
  const [target, ...flags] = spec.split(' ');
  const list = (prefix: string) => flags.find((f) => f.startsWith(prefix))?.slice(prefix.length).split(',');
  const zoneHints = list('z=');
  const nodeHints = list('n=');
  return ep(target!, {
    ready: flags.includes('r'),
    serving: flags.includes('s'),
    terminating: flags.includes('t'),
    ...(flags.includes('L') ? { nodeName: THIS_NODE } : { nodeName: 'other-node' }),
    ...(zoneHints ? { zoneHints } : {}),
    ...(nodeHints ? { nodeHints } : {}),
  });
}

const keys = (eps: readonly Endpoint[] | null) => (eps === null ? null : eps.map((e) => `${e.ip}:${e.port}`).sort());
const sorted = (l: readonly string[] | null | undefined) => (l === null || l === undefined ? l : [...l].sort());

test('the table holds every case of kube-proxy TestCategorizeEndpoints', (t) => {
  t.is(CASES.filter((c) => c.source === undefined).length, 26);
  t.is(new Set(CASES.map((c) => c.name)).size, CASES.length);
});

for (const c of CASES) {
  test(`categorizeEndpoints: ${c.name}`, (t) => {
    const node: NodeInfo | undefined = c.noNode ? undefined : { name: THIS_NODE, ...(c.zone ? { zone: c.zone } : {}), addresses: [] };
    const port = sp('ns/svc:p', '10.96.0.1', 80, c.endpoints.map(endpoint), {
      internalTrafficPolicy: c.service.itp ?? 'Cluster',
      externalTrafficPolicy: c.service.etp ?? 'Cluster',
      frontends: { clusterIPs: [{ family: 'IPv4', ip: '10.96.0.1' }], ...(c.service.nodePort ? { nodePort: c.service.nodePort } : {}), externalIPs: [], loadBalancerIngress: [], loadBalancerSourceRanges: [] },
    });
    const r = categorizeEndpoints(port, node);
    t.deepEqual(keys(r.cluster), sorted(c.cluster), 'cluster');
    t.deepEqual(keys(r.local), sorted(c.local), 'local');
    // As kube-proxy's test: with only one set used, all reachable is that set.
    const all = c.cluster !== null && c.local === null ? c.cluster : c.local !== null && c.cluster === null ? c.local : c.all!;
    t.deepEqual(keys(r.allReachable), sorted(all), 'allReachable');
    t.is(r.hasAnyEndpoints, all.length > 0 || c.onlyRemote === true, 'hasAnyEndpoints');
    // Lists keep the order of the service port's endpoints.
    for (const l of [r.cluster, r.local, r.allReachable]) if (l) t.deepEqual(l, port.endpoints.filter((e) => l.includes(e)));
  });
}

test("externallyAccessible: a NodePort, or an external or VIP-mode ingress IP of the view's family (its ClusterIP's), as each family's kube-proxy proxier sees the Service", (t) => {
  const frontends = (extra: Record<string, unknown>) => ({ clusterIPs: [], externalIPs: [], loadBalancerIngress: [], loadBalancerSourceRanges: [], ...extra });
  const ext6 = frontends({ externalIPs: [{ family: 'IPv6', ip: '2001:db8::7' }] });
  const lb6 = frontends({ loadBalancerIngress: [{ family: 'IPv6', ip: '2001:db8::10', ipMode: 'VIP' }] });
  const proxy6 = frontends({ loadBalancerIngress: [{ family: 'IPv6', ip: '2001:db8::10', ipMode: 'Proxy' }] });
  t.true(externallyAccessible({ clusterIP: 'fd00:96::1', frontends: ext6 }), 'an IPv6 external IP in the IPv6 view');
  t.true(externallyAccessible({ clusterIP: 'fd00:96::1', frontends: lb6 }), 'an IPv6 ingress IP in the IPv6 view');
  t.false(externallyAccessible({ clusterIP: '10.96.0.1', frontends: ext6 }), 'an IPv6 external IP is not the IPv4 view\'s');
  t.false(externallyAccessible({ clusterIP: '10.96.0.1', frontends: lb6 }));
  t.false(externallyAccessible({ clusterIP: 'fd00:96::1', frontends: proxy6 }), 'ipMode Proxy is the load balancer\'s');
  t.true(externallyAccessible({ clusterIP: '10.96.0.1', frontends: frontends({ externalIPs: [{ family: 'IPv4', ip: '203.0.113.1' }] }) }));
  t.true(externallyAccessible({ clusterIP: 'fd00:96::1', frontends: frontends({ nodePort: 30080 }) }));
  // internalTrafficPolicy Local with an IPv6 external IP only: the IPv6 view uses the cluster set for it, the IPv4 view never does.
  const port = (clusterIP: string) => sp('ns/svc:p', clusterIP, 80, [], { internalTrafficPolicy: 'Local', frontends: ext6 });
  t.deepEqual(categorizeEndpoints(port('fd00:96::1'), undefined).cluster, []);
  t.is(categorizeEndpoints(port('10.96.0.1'), undefined).cluster, null);
});

test('topologyMode: PreferSameNode, then PreferSameZone, else none', (t) => {
  const node: NodeInfo = { name: 'n1', zone: 'z1', addresses: [] };
  t.is(topologyMode([ep('10.0.0.1:80', { nodeHints: ['n1'], zoneHints: ['z1'] })], node), 'PreferSameNode');
  t.is(topologyMode([ep('10.0.0.1:80', { nodeHints: ['n2'], zoneHints: ['z1'] })], node), 'PreferSameZone');
  t.is(topologyMode([ep('10.0.0.1:80', { nodeHints: ['n2'], zoneHints: ['z2'] })], node), '');
  t.is(topologyMode([ep('10.0.0.1:80', { ready: false, nodeHints: ['n1'] })], node), '');
  t.is(topologyMode([], node), '');
});

test('internalEndpoints: the cluster set, or under internalTrafficPolicy Local the local set; DROP when only other nodes have endpoints, REJECT when none has; countServingEndpoints sums them', (t) => {
  const node: NodeInfo = { name: 'n1', addresses: [] };
  const eps = [
    ep('10.0.0.1:80', { nodeName: 'n2' }),
    ep('10.0.0.2:80', { nodeName: 'n1', ready: false, serving: true, terminating: true }),
    ep('10.0.0.3:80', { nodeName: 'n1', ready: false, serving: false, terminating: true }),
  ];
  const local = sp('ns/a', '10.96.0.1', 80, eps, { internalTrafficPolicy: 'Local' });
  const ips = (r: { endpoints: readonly { ip: string }[] }) => r.endpoints.map((e) => e.ip);
  // This node's only usable endpoint is serving and terminating: the fallback of the local set.
  t.like(internalEndpoints(local, node), { policy: 'local', none: null });
  t.deepEqual(ips(internalEndpoints(local, node)), ['10.0.0.2']);
  t.deepEqual(clusterEndpoints(local, node).map((e) => e.ip), ['10.0.0.1'], 'the cluster set is still there for the cluster policy');
  // On another node, or with no node: endpoints elsewhere, none here.
  t.deepEqual(internalEndpoints(local, { name: 'n3', addresses: [] }), { policy: 'local', endpoints: [], none: 'DROP' });
  t.deepEqual(internalEndpoints(local, undefined), { policy: 'local', endpoints: [], none: 'DROP' });
  const dead = sp('ns/c', '10.96.0.3', 80, [eps[2]!], { internalTrafficPolicy: 'Local' });
  t.deepEqual(internalEndpoints(dead, node), { policy: 'local', endpoints: [], none: 'REJECT' });
  const ready = sp('ns/b', '10.96.0.2', 80, [ep('10.0.0.3:80'), ep('10.0.0.4:80', { ready: false, serving: true, terminating: true })]);
  t.like(internalEndpoints(ready, node), { policy: 'cluster', none: null });
  t.deepEqual(ips(internalEndpoints(ready, node)), ['10.0.0.3']);
  t.deepEqual(internalEndpoints(sp('ns/d', '10.96.0.4', 80, []), node), { policy: 'cluster', endpoints: [], none: 'REJECT' });
  t.is(countServingEndpoints({ ...snap(local, ready), node }), 2);
});

test('ServingEndpointCount: counting the changed service ports again gives what counting every one gives; another node makes it count all again', (t) => {
  const n1: NodeInfo = { name: 'n1', addresses: [] };
  const a = sp('ns/a:http', '10.96.0.1', 80, [ep('10.0.0.1:80', { nodeName: 'n1' }), ep('10.0.0.2:80', { nodeName: 'n2' }), ep('10.0.0.6:80', { nodeName: 'n2' })], {
    internalTrafficPolicy: 'Local',
  });
  const b = sp('ns/b:http', '10.96.0.2', 80, [ep('10.0.0.3:80'), ep('10.0.0.4:80')]);
  const c = sp('ns/c:http', '10.96.0.3', 80, [ep('10.0.0.5:80')]);
  const count = new ServingEndpointCount();
  const first = { ...snap(a, b), node: n1 };
  t.is(count.reset(first), 3);
  // b loses an endpoint, c comes: only those two are counted again.
  const second = { ...snap(a, { ...b, endpoints: b.endpoints.slice(1) }, c), node: n1 };
  t.is(count.update(second, ['ns/b:http', 'ns/c:http']), countServingEndpoints(second));
  t.is(count.total, 3);
  // a goes: it counts 0 and is forgotten.
  const third = { ...snap({ ...b, endpoints: b.endpoints.slice(1) }, c), node: n1 };
  t.is(count.update(third, ['ns/a:http']), 2);
  // On node n2, a has two local endpoints: a node of other fields recounts every service port, even those not named.
  const n2: NodeInfo = { name: 'n2', addresses: [] };
  const fourth = { ...snap(a, b), node: n2 };
  t.is(count.update(fourth, []), 4);
  t.is(countServingEndpoints(fourth), 4);
  // The same node in another object is no change.
  t.is(count.update({ ...snap(a, b), node: { name: 'n2', addresses: [] } }, ['ns/b:http']), 4);
});
