/**
 * drover's Kubernetes source against the real kube-apiserver (the test
 * API server of test/peers/, dual-stack: 10.96.0.0/16,fd00:96::/112), in
 * throw-away network namespaces with real connections:
 *
 *   - deploy/kubernetes/drover.yaml's ServiceAccount, ClusterRole and
 *     binding applied unchanged, and `drover run` given a token of that
 *     ServiceAccount from the TokenRequest API: the RBAC of deploy/ is
 *     what drover needs;
 *   - Services of every type (ClusterIP, NodePort, LoadBalancer with its
 *     status written through the status subresource, ExternalName,
 *     headless, dual-stack), EndpointSlices written as the EndpointSlice
 *     controller writes them, and this node's Node: connections reach the
 *     right backends, and what is not proxied has no rule;
 *   - changes through the API (endpoints moved, added, not ready; a
 *     NodePort and a load-balancer IP changed; a Service deleted) reach
 *     the kernel;
 *   - a role lacking one verb gives one clear error naming the verb and
 *     the resource.
 */
import test from 'ava';
import { join } from 'node:path';
import { drover, startDrover, synced, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';
import { serviceObject } from './support/objects.ts';
import { clusterTestsGate, TIMEOUT_MS } from './support/peers.ts';
import { applyRoleWithout, serviceAccountToken, writeKubeconfig } from './support/rbac.ts';
import { clusterWorld, NODE, NS, type ClusterWorld } from './support/world.ts';

const gate = await clusterTestsGate();
const LB_IP = '192.0.2.50';
const LB_IP2 = '192.0.2.51';

if (gate.reason !== undefined) {
  test.skip(`cluster tests (Kubernetes source against the real API server) skipped: ${gate.reason}`, () => {});
} else {
  const { peers } = gate;
  let w: ClusterWorld;
  let proxy: RunningDrover | undefined;
  const natRules = async (): Promise<string> => (await w.topo.exec(w.topo.node, 'iptables-nft-save', ['-t', 'nat'])).stdout;
  const nat6Rules = async (): Promise<string> => (await w.topo.exec(w.topo.node, 'ip6tables-nft-save', ['-t', 'nat'])).stdout;
  /** drover's log lines name their level (warn, error, fatal). */
  const isProblem = (l: { level?: unknown }) => ['warn', 'error', 'fatal'].includes(l.level as string);
  const problems = (d: RunningDrover) => d.lines(/./).filter(isProblem);

  test.before(async (t) => {
    t.timeout(TIMEOUT_MS);
    w = await clusterWorld(peers, { serviceClusterIPRange: '10.96.0.0/16,fd00:96::/112' });
  });
  test.after.always(async () => {
    await proxy?.stop();
    await w?.destroy();
  });

  test.serial("drover, as deploy/'s ServiceAccount with a TokenRequest token, serves every type of Service written to the real API server", async (t) => {
    t.timeout(TIMEOUT_MS);
    const { api, topo, ep, slice, reached, eventually } = w;
    const add = w.service;
    await add('web', { clusterIP: '10.96.10.10' });
    await slice('web', 'web-abcde', [ep('b1'), ep('b2')]);
    await add('np', { type: 'NodePort', ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }] });
    await slice('np', 'np-abcde', [ep('b3')]);
    // status.loadBalancer sent with the Service is dropped: only the status subresource writes it.
    const withStatus = await api.must('POST', `/api/v1/namespaces/${NS}/services`, { ...serviceObject(NS, 'lb-status', { type: 'LoadBalancer' }), status: { loadBalancer: { ingress: [{ ip: '192.0.2.99' }] } } });
    t.deepEqual(withStatus.status, { loadBalancer: {} });
    await api.must('DELETE', `/api/v1/namespaces/${NS}/services/lb-status`);
    const lb = await add('lb', { type: 'LoadBalancer' });
    const lbNodePort = lb.spec.ports![0]!.nodePort!;
    t.true(lbNodePort >= 30000 && lbNodePort <= 32767, `the API server allocated the LoadBalancer's NodePort (${lbNodePort})`);
    await api.must('PATCH', `/api/v1/namespaces/${NS}/services/lb/status`, { status: { loadBalancer: { ingress: [{ ip: LB_IP }] } } });
    await slice('lb', 'lb-abcde', [ep('b4')]);
    await add('ext', { type: 'ExternalName', externalName: 'db.example.com' });
    await add('hl', { clusterIP: 'None' });
    await slice('hl', 'hl-abcde', [ep('b1')], 'IPv4', true);
    const ds = await add('ds', { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] });
    const [ds4, ds6] = ds.spec.clusterIPs!;
    t.regex(ds6 ?? '', /^fd00:96::/, 'the API server allocated an IPv6 ClusterIP');
    await slice('ds', 'ds-v4', [ep('b1')]);
    await slice('ds', 'ds-v6', [ep('b2', { v6: true })], 'IPv6');

    proxy = startDrover([...w.sourceFlags(), ...w.runFlags('main')]);
    await synced(proxy, 1, 120_000);
    await eventually('ClusterIP', '10.96.10.10', 80, 'b1,b2');
    t.is(await reached(topo.nodeIp, 30080), 'b3', 'NodePort on the node IP');
    t.is(await reached(LB_IP, 80), 'b4', 'the load-balancer IP of status.loadBalancer');
    t.is(await reached(topo.nodeIp, lbNodePort), 'b4', "the LoadBalancer's NodePort");
    t.is(await reached(ds4!, 80), 'b1', 'the dual-stack Service over IPv4');
    t.is(await reached(ds6!, 80), 'b2', 'the dual-stack Service over IPv6');
    const nat = await natRules();
    t.regex(nat, /shop\/web:http cluster IP/);
    t.notRegex(nat, /shop\/ext/, 'no rule for the ExternalName Service');
    t.notRegex(nat, /shop\/hl/, 'no rule for the headless Service');
    t.regex(await nat6Rules(), /shop\/ds:http cluster IP/);
    // The API server's own Service, without endpoints here (this test server runs no endpoint reconciler).
    t.regex((await topo.exec(topo.node, 'iptables-nft-save', ['-t', 'filter'])).stdout, /default\/kubernetes:https has no endpoints/);
    t.deepEqual(problems(proxy), [], 'no warning or error');
  });

  test.serial('every change written to the real API server reaches the kernel', async (t) => {
    t.timeout(TIMEOUT_MS);
    if (proxy === undefined) return t.fail('drover did not start in the test before');
    const { api, topo, ep, slice, reached, eventually } = w;
    await slice('web', 'web-abcde', [ep('b3')]);
    await eventually('endpoints replaced', '10.96.10.10', 80, 'b3');
    await slice('web', 'web-fghij', [ep('b4')]);
    await eventually('a second EndpointSlice', '10.96.10.10', 80, 'b3,b4');
    await slice('web', 'web-fghij', [ep('b4', { ready: false })]);
    await eventually('an endpoint not ready', '10.96.10.10', 80, 'b3');

    await api.must('PATCH', `/api/v1/namespaces/${NS}/services/np`, { spec: { ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP', nodePort: 30081 }] } });
    await eventually('the new NodePort', topo.nodeIp, 30081, 'b3');
    t.notRegex(await reached(topo.nodeIp, 30080), /b3/, 'the old NodePort no longer answers');

    await api.must('PATCH', `/api/v1/namespaces/${NS}/services/lb/status`, { status: { loadBalancer: { ingress: [{ ip: LB_IP2 }] } } });
    await eventually('the new load-balancer IP', LB_IP2, 80, 'b4');
    t.notRegex(await reached(LB_IP, 80), /b4/, 'the old load-balancer IP no longer answers');

    await api.must('DELETE', `/api/v1/namespaces/${NS}/services/web`);
    await until('the deleted Service has no rule', async () => !/shop\/web:/.test(await natRules()), 60_000, 250);
    t.notRegex(await reached('10.96.10.10', 80), /b\d/, 'the deleted ClusterIP no longer answers');
    t.is(await reached(topo.nodeIp, 30081), 'b3', 'the other Services are served');
    t.deepEqual(problems(proxy), [], 'no warning or error');
  });

  test.serial("a change to this node's Node (its zone) reaches the kernel through the topology hints", async (t) => {
    t.timeout(TIMEOUT_MS);
    if (proxy === undefined) return t.fail('drover did not start in the test before');
    const { api, topo, slice, reached, eventually } = w;
    await w.service('zoned', { clusterIP: '10.96.10.30', trafficDistribution: 'PreferClose' });
    const zoned = (b: string, zone: string) => ({ ip: topo.backend(b).ip, pod: `${b}-pod`, nodeName: zone === 'zone-a' ? NODE : 'node-b', zone, hintZone: zone });
    await slice('zoned', 'zoned-abcde', [zoned('b1', 'zone-a'), zoned('b2', 'zone-b')]);
    await eventually('the endpoint hinted for zone-a, the Node\'s zone', '10.96.10.30', 80, 'b1');
    await api.must('PATCH', `/api/v1/nodes/${NODE}`, { metadata: { labels: { 'topology.kubernetes.io/zone': 'zone-b' } } });
    await eventually('the endpoint hinted for zone-b once the Node moved there', '10.96.10.30', 80, 'b2');
    await api.must('PATCH', `/api/v1/nodes/${NODE}`, { metadata: { labels: { 'topology.kubernetes.io/zone': 'zone-c' } } });
    await eventually('every endpoint when no hint names the Node\'s zone', '10.96.10.30', 80, 'b1,b2');
    t.is(await reached(topo.nodeIp, 30081), 'b3', 'the other Services are served');
    t.deepEqual(problems(proxy), [], 'no warning or error');
  });

  test.serial('a ClusterRole lacking list on EndpointSlices: the one-shot command fails naming the verb and resource', async (t) => {
    t.timeout(TIMEOUT_MS);
    const { api, dir } = w;
    await applyRoleWithout(api, 'drover-nolist', 'endpointslices', 'list');
    const config = await writeKubeconfig(api, await serviceAccountToken(api, 'kube-system', 'drover-nolist'), join(dir, 'nolist.kubeconfig'));
    const r = await drover(['render', '--source', 'kubernetes', '--kubeconfig', config, '--hostname-override', NODE, '--service-cidr', '10.96.0.0/16', '--list-timeout', '20s']);
    t.not(r.code, 0);
    t.regex(r.stderr, /cannot list resource "endpointslices" in API group "discovery\.k8s\.io"/, r.stderr);
  });

  test.serial('a ClusterRole lacking watch on EndpointSlices: drover serves what it listed and names the verb and resource', async (t) => {
    t.timeout(TIMEOUT_MS);
    await proxy?.stop();
    proxy = undefined;
    const { api, dir } = w;
    await applyRoleWithout(api, 'drover-nowatch', 'endpointslices', 'watch');
    const config = await writeKubeconfig(api, await serviceAccountToken(api, 'kube-system', 'drover-nowatch'), join(dir, 'nowatch.kubeconfig'));
    const d = startDrover([...w.sourceFlags(config), ...w.runFlags('nowatch')]);
    t.teardown(() => d.stop());
    await until('the watch error', async () => d.lines(/EndpointSlices/).some(isProblem), 120_000);
    const errors = problems(d);
    t.log(errors[0]?.msg);
    t.true(errors.length > 0);
    for (const e of errors) t.regex(e.msg as string, /cannot watch resource "endpointslices" in API group "discovery\.k8s\.io"/);
    await synced(d, 1, 60_000);
    t.is(await w.reached(w.topo.nodeIp, 30081), 'b3', 'what was listed is served');
  });
}
