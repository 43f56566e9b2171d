import test from 'ava';
import { buildSnapshot } from '../../src/model/normalise.ts';
import type { ParsedEndpointSlice, ParsedNode, ParsedObject, ParsedService } from '../../src/model/parsed.ts';
import { errorText, okObject, parse } from './model-helpers.ts';
import { internalEndpoints } from '../../src/model/policy.ts';
import { ep, sp } from '../support/snapshots.ts';

const service = (spec: Record<string, unknown>, status?: Record<string, unknown>) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: 'shop' },
  spec,
  ...(status ? { status } : {}),
});

const node = (name: string, extra: Record<string, unknown> = {}) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name, ...extra } });

const LB_SPEC = {
  type: 'LoadBalancer',
  clusterIP: '10.96.5.5',
  clusterIPs: ['10.96.5.5', 'fd00:10:96::5'],
  ipFamilies: ['IPv4', 'IPv6'],
  externalIPs: ['192.0.2.10', '2001:db8::10', '192.0.2.10'],
  loadBalancerSourceRanges: ['203.0.113.0/24', '2001:db8:1::/48'],
  externalTrafficPolicy: 'Local',
  healthCheckNodePort: 32000,
  ports: [{ name: 'http', port: 80, nodePort: 30080 }],
};
const LB_STATUS = { loadBalancer: { ingress: [{ ip: '198.51.100.7' }, { ip: '198.51.100.8', ipMode: 'Proxy' }, { hostname: 'lb.example.com' }] } };

test('Service frontends: both ClusterIP families, external IPs, LoadBalancer ingress with ipMode, source ranges, health-check NodePort', (t) => {
  const svc = okObject(parse(service(LB_SPEC, LB_STATUS))) as ParsedService;
  t.is(svc.clusterIP, '10.96.5.5');
  t.deepEqual(svc.clusterIPs, [{ family: 'IPv4', ip: '10.96.5.5' }, { family: 'IPv6', ip: 'fd00:10:96::5' }]);
  t.deepEqual(svc.externalIPs, [{ family: 'IPv4', ip: '192.0.2.10' }, { family: 'IPv6', ip: '2001:db8::10' }]);
  t.deepEqual(svc.loadBalancerIngress, [
    { family: 'IPv4', ip: '198.51.100.7', ipMode: 'VIP' },
    { family: 'IPv4', ip: '198.51.100.8', ipMode: 'Proxy' },
  ]);
  t.deepEqual(svc.loadBalancerSourceRanges, ['203.0.113.0/24', '2001:db8:1::/48']);
  t.is(svc.healthCheckNodePort, 32000);

  const r = buildSnapshot([svc], { serviceCIDR: '10.96.0.0/12' });
  const sp = r.snapshot.services.get('shop/web:http')!;
  t.is(sp.clusterIP, '10.96.5.5');
  t.deepEqual(sp.frontends, {
    clusterIPs: [{ family: 'IPv4', ip: '10.96.5.5' }, { family: 'IPv6', ip: 'fd00:10:96::5' }],
    nodePort: 30080,
    externalIPs: [{ family: 'IPv4', ip: '192.0.2.10' }, { family: 'IPv6', ip: '2001:db8::10' }],
    loadBalancerIngress: [
      { family: 'IPv4', ip: '198.51.100.7', ipMode: 'VIP' },
      { family: 'IPv4', ip: '198.51.100.8', ipMode: 'Proxy' },
    ],
    loadBalancerSourceRanges: ['203.0.113.0/24', '2001:db8:1::/48'],
    healthCheckNodePort: 32000,
  });
  t.true(Object.isFrozen(sp.frontends) && Object.isFrozen(sp.frontends.clusterIPs));
});

test('Service frontends: a ClusterIP alone gives one IPv4 frontend; an allocated one too', (t) => {
  const svc = okObject(parse(service({ clusterIP: '10.96.5.6', ports: [{ port: 80 }] }))) as ParsedService;
  t.deepEqual(svc.clusterIPs, [{ family: 'IPv4', ip: '10.96.5.6' }]);
  const shep = okObject(parse({ kind: 'Service', metadata: { name: 'a' }, spec: { ports: [{ port: 80 }] } })) as ParsedService;
  const sp = buildSnapshot([shep], { serviceCIDR: '10.96.0.0/12' }).snapshot.services.get('default/a')!;
  t.deepEqual(sp.frontends.clusterIPs, [{ family: 'IPv4', ip: sp.clusterIP }]);
  t.deepEqual(sp.frontends.externalIPs, []);
});

test('Service frontends: bad values are named by field and skip the Service', (t) => {
  const bad = (patch: Record<string, unknown>, status?: Record<string, unknown>) => errorText(parse(service({ ...LB_SPEC, ...patch }, status)));
  t.is(bad({ externalIPs: ['192.0.2.300'] }), 'in.yaml: Service shop/web: spec.externalIPs[0]: "192.0.2.300" is not a valid IPv4 or IPv6 address');
  t.is(bad({ externalIPs: ['127.0.0.1'] }), 'in.yaml: Service shop/web: spec.externalIPs[0]: "127.0.0.1" is a loopback address');
  t.is(bad({ healthCheckNodePort: 70000 }), 'in.yaml: Service shop/web: spec.healthCheckNodePort: 70000 is out of range 1-65535');
  t.is(bad({ clusterIPs: ['10.96.5.7'] }), 'in.yaml: Service shop/web: spec.clusterIPs[0]: "10.96.5.7" must equal spec.clusterIP "10.96.5.5"');
  t.is(bad({ clusterIPs: ['10.96.5.5', '10.96.5.8'] }), 'in.yaml: Service shop/web: spec.clusterIPs[1]: "10.96.5.8" is a second IPv4 ClusterIP (at most one per family) (and 1 more problem)');
  t.is(bad({ ipFamilies: ['IPv6', 'IPv4'] }), 'in.yaml: Service shop/web: spec.ipFamilies[0]: IPv6 does not match ClusterIP "10.96.5.5" (and 1 more problem)');
  t.is(bad({ ipFamilies: ['IPv5'] }), 'in.yaml: Service shop/web: spec.ipFamilies[0]: Invalid option: expected one of "IPv4"|"IPv6"');
  t.is(bad({}, { loadBalancer: { ingress: [{ ip: 'lb' }] } }), 'in.yaml: Service shop/web: status.loadBalancer.ingress[0].ip: "lb" is not a valid IPv4 or IPv6 address');
  t.is(bad({}, { loadBalancer: { ingress: [{ ip: '198.51.100.7', ipMode: 'vip' }] } }), 'in.yaml: Service shop/web: status.loadBalancer.ingress[0].ipMode: Invalid option: expected one of "VIP"|"Proxy"');
});

test('loadBalancerSourceRanges, as kube-proxy reads them: whitespace trimmed, a malformed range named and skipped, the Service kept', (t) => {
  const r = parse(service({ ...LB_SPEC, loadBalancerSourceRanges: [' 203.0.113.0/24 ', '10.0.0.0/33', '203.0.113.0/24'] }));
  t.deepEqual((okObject(r) as ParsedService).loadBalancerSourceRanges, ['203.0.113.0/24']);
  t.deepEqual(r.status === 'ok' ? r.warnings.map(String) : [], [
    'in.yaml: Service shop/web: spec.loadBalancerSourceRanges[1]: "10.0.0.0/33" is not a valid CIDR (expected e.g. "203.0.113.0/24" or "2001:db8::/32"); range ignored',
  ]);
});

test('a nodePort on a ClusterIP Service is ignored, as the API server never sets one there', (t) => {
  const svc = okObject(parse(service({ ...LB_SPEC, type: 'ClusterIP', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }))) as ParsedService;
  t.false('nodePort' in svc.ports[0]!);
});

test('EndpointSlice hints: zones and nodes sorted and de-duplicated; bad ones named', (t) => {
  const slice = (hints: unknown) =>
    parse({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'web-1', namespace: 'shop', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.244.0.1'], hints }],
      ports: [{ name: 'http', port: 8080 }],
    });
  const ok = okObject(slice({ forZones: [{ name: 'zone-b' }, { name: 'zone-a' }, { name: 'zone-b' }], forNodes: [{ name: 'node-1' }] })) as ParsedEndpointSlice;
  t.like(ok.groups[0]!.addresses[0], { zoneHints: ['zone-a', 'zone-b'], nodeHints: ['node-1'] });
  const none = okObject(slice({ forZones: [] })) as ParsedEndpointSlice;
  t.false('zoneHints' in none.groups[0]!.addresses[0]!);
  t.is(errorText(slice({ forZones: [{ name: 'zone a' }] })), 'in.yaml: EndpointSlice shop/web-1: endpoints[0].hints.forZones[0].name: "zone a" is not a valid zone (a label value: alphanumerics, \'-\', \'_\' and \'.\', at most 63 characters)');
  t.is(errorText(slice({ forNodes: [{ name: 'Node_1' }] })), 'in.yaml: EndpointSlice shop/web-1: endpoints[0].hints.forNodes[0].name: "Node_1" is not a valid DNS-1123 subdomain (dot-separated DNS-1123 labels, at most 253 characters)');
});

test('Node: name, zone label and addresses; bad values named by the Node name', (t) => {
  const n = okObject(
    parse(node('kind-worker', { labels: { 'topology.kubernetes.io/zone': 'zone-a', other: 'x' } }) as object),
  ) as ParsedNode;
  t.like(n, { kind: 'Node', identity: 'Node//kind-worker', name: 'kind-worker', zone: 'zone-a', addresses: [] });
  const withAddr = okObject(
    parse({ ...node('n2', { labels: { 'topology.kubernetes.io/zone': '' } }), status: { addresses: [{ type: 'InternalIP', address: '172.18.0.2' }, { type: 'Hostname', address: 'n2' }] } }),
  ) as ParsedNode;
  t.false('zone' in withAddr);
  t.deepEqual(withAddr.addresses, [{ type: 'InternalIP', address: '172.18.0.2' }, { type: 'Hostname', address: 'n2' }]);
  t.is(errorText(parse({ ...node('n3'), status: { addresses: [{ type: 'InternalIP', address: 'n3' }] } })), 'in.yaml: Node n3: status.addresses[0].address: "n3" is not a valid IPv4 or IPv6 address');
  t.is(errorText(parse(node('N_4'))), 'in.yaml: Node N_4: metadata.name: "N_4" is not a valid DNS-1123 subdomain (dot-separated DNS-1123 labels, at most 253 characters)');
  t.is(errorText(parse(node('n5', { labels: { 'topology.kubernetes.io/zone': 'a b' } }))), 'in.yaml: Node n5: metadata.labels["topology.kubernetes.io/zone"]: "a b" is not a valid zone (a label value: alphanumerics, \'-\', \'_\' and \'.\', at most 63 characters)');
});

test('Node: leaving while its deletion has begun or with the cluster autoscaler\'s taint; other taints do not count', (t) => {
  const parsedNode = (extra: Record<string, unknown>, spec?: Record<string, unknown>) => okObject(parse({ ...node('n1', extra), ...(spec ? { spec } : {}) })) as ParsedNode;
  t.false('leaving' in parsedNode({}));
  t.false('leaving' in parsedNode({}, { taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] }));
  t.is(parsedNode({ deletionTimestamp: '2026-12-01T10:00:00Z' }).leaving, 'it is being deleted (metadata.deletionTimestamp is set)');
  t.is(parsedNode({}, { taints: [{ key: 'x' }, { key: 'ToBeDeletedByClusterAutoscaler', value: '1764583200', effect: 'NoSchedule' }] }).leaving, 'it has the ToBeDeletedByClusterAutoscaler taint');
  t.deepEqual(buildSnapshot([parsedNode({ deletionTimestamp: '2026-12-01T10:00:00Z' })], { serviceCIDR: '10.96.0.0/12' }).snapshot.node, {
    name: 'n1',
    addresses: [],
    leaving: 'it is being deleted (metadata.deletionTimestamp is set)',
  });
  t.is(errorText(parse({ ...node('n2'), spec: { taints: [{ effect: 'NoSchedule' }] } })), 'in.yaml: Node n2: spec.taints[0].key: required');
});

test('Snapshot.node: the lone Node, or the one named; none with several and no name', (t) => {
  const nodes = ['n1', 'n2'].map((name, i) => okObject(parse(node(name, { labels: { 'topology.kubernetes.io/zone': `z${i + 1}` } }), i))) as ParsedObject[];
  t.deepEqual(buildSnapshot([nodes[0]!], { serviceCIDR: '10.96.0.0/12' }).snapshot.node, { name: 'n1', zone: 'z1', addresses: [] });
  t.is(buildSnapshot([], { serviceCIDR: '10.96.0.0/12' }).snapshot.node, undefined);
  t.deepEqual(buildSnapshot(nodes, { serviceCIDR: '10.96.0.0/12', nodeName: 'n2' }).snapshot.node, { name: 'n2', zone: 'z2', addresses: [] });
  const several = buildSnapshot(nodes, { serviceCIDR: '10.96.0.0/12' });
  t.is(several.snapshot.node, undefined);
  t.deepEqual(several.warnings.map(String), [
    'in.yaml: Node n1: 2 Node objects and no node name to choose one; Node ignored',
    'in.yaml: Node n2: 2 Node objects and no node name to choose one; Node ignored',
  ]);
  const dup = buildSnapshot([nodes[0]!, nodes[0]!], { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(dup.errors.map(String), ['in.yaml: Node n1: duplicate Node n1, already defined in in.yaml; this copy is skipped']);
});

test('Snapshot.node: with a node name and no Node object of that name, the node is known by name alone, and its endpoints are local', (t) => {
  const n1 = okObject(parse(node('n1'))) as ParsedObject;
  t.deepEqual(buildSnapshot([], { serviceCIDR: '10.96.0.0/12', nodeName: 'n9' }).snapshot.node, { name: 'n9', addresses: [], nameOnly: true });
  const other = buildSnapshot([n1], { serviceCIDR: '10.96.0.0/12', nodeName: 'n9' });
  t.deepEqual(other.snapshot.node, { name: 'n9', addresses: [], nameOnly: true });
  t.deepEqual(other.warnings.map(String), ['in.yaml: Node n1: no Node is named n9; Node ignored']);
  t.is(
    buildSnapshot([], { serviceCIDR: '10.96.0.0/12', nodeName: 'n9' }).snapshot.node,
    buildSnapshot([], { serviceCIDR: '10.96.0.0/12', nodeName: 'n9' }).snapshot.node,
    'the same object each build, so that the proxier sees no node change',
  );
  const local = sp('ns/a:http', '10.96.0.1', 80, [ep('10.0.0.1:80', { nodeName: 'n9' }), ep('10.0.0.2:80', { nodeName: 'n8' })], { internalTrafficPolicy: 'Local' });
  t.deepEqual(internalEndpoints(local, other.snapshot.node).endpoints.map((e) => e.ip), ['10.0.0.1']);
});
