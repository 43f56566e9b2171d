/**
 * The Services' health checks (kube-proxy's ServiceHealthServer): which
 * Services get one and what they count, and real HTTP servers on loopback
 * fed by a real proxier and iptables mode on the in-memory iptables.
 */
import test from 'ava';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { parseIP } from '../../src/model/addr.ts';
import { healthCheckServices } from '../../src/model/health-check.ts';
import { buildSnapshot } from '../../src/model/normalise.ts';
import { ipv4Frontends, type Endpoint, type ServicePort, type Snapshot } from '../../src/model/types.ts';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { Proxier } from '../../src/proxier/proxier.ts';
import type { SourceRead } from '../../src/sources/source.ts';
import { startServers } from '../../src/server/daemon.ts';
import { serviceHealthAnswer, ServiceHealthServer } from '../../src/server/service-health.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { until } from '../support/wait.ts';
import { okObject, parse } from './model-helpers.ts';

const LOOPBACK = parseIP('127.0.0.1')!;
const NODE = { name: 'node-a', addresses: [] };
const local = (target: string, extra: Partial<Endpoint> = {}) => ep(target, { nodeName: 'node-a', ...extra });
const remote = (target: string) => ep(target, { nodeName: 'node-b' });

/** A port of a LoadBalancer Service with externalTrafficPolicy Local and healthCheckNodePort `hc`. */
function lb(key: string, ip: string, hc: number, endpoints: Endpoint[], extra: Partial<ServicePort> = {}): ServicePort {
  return sp(key, ip, 80, endpoints, {
    type: 'LoadBalancer',
    externalTrafficPolicy: 'Local',
    frontends: { ...ipv4Frontends(ip, 30080), healthCheckNodePort: hc },
    ...extra,
  });
}

function onNode(...ports: ServicePort[]): Snapshot {
  return { ...snap(...ports), node: NODE };
}

/** A port the kernel just gave out on loopback, free again. */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function probe(port: number, path = '/') {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    nosniff: res.headers.get('x-content-type-options'),
    weight: res.headers.get('x-load-balancing-endpoint-weight'),
    body: await res.text(),
  };
}

/** kube-proxy's body, byte for byte. */
function body(namespace: string, name: string, n: number, healthy = true): string {
  return `{\n\t"service": {\n\t\t"namespace": "${namespace}",\n\t\t"name": "${name}"\n\t},\n\t"localEndpoints": ${n},\n\t"serviceProxyHealthy": ${healthy}\n}`;
}

test('the health checks of a snapshot: LoadBalancer, externalTrafficPolicy Local, healthCheckNodePort; local ready endpoints counted by IP over every port', (t) => {
  const services = healthCheckServices(
    onNode(
      lb('shop/web:http', '172.30.0.1', 32001, [local('10.180.0.1:80'), local('10.180.0.2:80'), remote('10.180.1.1:80')]),
      lb('shop/web:https', '172.30.0.1', 32001, [local('10.180.0.1:443'), local('10.180.0.3:443')]),
      lb('shop/draining', '172.30.0.2', 32002, [local('10.180.0.4:80', { ready: false, serving: true, terminating: true }), remote('10.180.1.2:80')]),
      lb('shop/cluster', '172.30.0.3', 32003, [local('10.180.0.5:80')], { externalTrafficPolicy: 'Cluster' }),
      lb('shop/nodeport', '172.30.0.4', 32004, [local('10.180.0.6:80')], { type: 'NodePort' }),
      sp('shop/plain', '172.30.0.5', 80, [local('10.180.0.7:80')]),
    ),
  );
  t.deepEqual([...services], [
    ['shop/draining', { namespace: 'shop', name: 'draining', port: 32002, localEndpoints: 0 }],
    ['shop/web', { namespace: 'shop', name: 'web', port: 32001, localEndpoints: 3 }],
  ]);
  const noNode = healthCheckServices(snap(lb('shop/web:http', '172.30.0.1', 32001, [local('10.180.0.1:80')])));
  t.is(noNode.get('shop/web')?.localEndpoints, 0, 'without a Node no endpoint is local');
});

test('from manifests: a LoadBalancer Service, its EndpointSlice and this Node give the health check and its count', (t) => {
  const objects = [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'shop' },
      spec: {
        type: 'LoadBalancer',
        clusterIP: '10.96.5.5',
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: 32000,
        ports: [
          { name: 'http', port: 80, nodePort: 30080 },
          { name: 'https', port: 443, nodePort: 30443 },
        ],
      },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'web-1', namespace: 'shop', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [
        { addresses: ['10.244.0.1'], nodeName: 'node-a' },
        { addresses: ['10.244.0.2'], nodeName: 'node-a', conditions: { ready: false, serving: true, terminating: true } },
        { addresses: ['10.244.1.1'], nodeName: 'node-b' },
      ],
      ports: [
        { name: 'http', port: 8080 },
        { name: 'https', port: 8443 },
      ],
    },
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a' } },
  ].map((raw, i) => okObject(parse(raw, i)));
  const { snapshot } = buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12', nodeName: 'node-a' });
  t.deepEqual([...healthCheckServices(snapshot)], [['shop/web', { namespace: 'shop', name: 'web', port: 32000, localEndpoints: 1 }]]);
});

test("the answer is kube-proxy's: 200 with local endpoints and a healthy proxy, 503 otherwise", (t) => {
  t.deepEqual(serviceHealthAnswer({ namespace: 'shop', name: 'web' }, 2, true), {
    status: 200,
    contentType: 'application/json',
    body: body('shop', 'web', 2),
    headers: { 'X-Load-Balancing-Endpoint-Weight': '2' },
  });
  t.is(serviceHealthAnswer({ namespace: 'shop', name: 'web' }, 0, true).status, 503);
  const unhealthy = serviceHealthAnswer({ namespace: 'shop', name: 'web' }, 2, false);
  t.is(unhealthy.status, 503);
  t.is(unhealthy.body, body('shop', 'web', 2, false));
  t.deepEqual(JSON.parse(unhealthy.body), { service: { namespace: 'shop', name: 'web' }, localEndpoints: 2, serviceProxyHealthy: false });
});

test('drover run serves each health check on its port after a sync: 200 and 503 with the right localEndpoints, gone with its Service', async (t) => {
  const [hcWeb, hcApi] = [await freePort(), await freePort()];
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render: { clusterCIDR: '10.0.0.0/8', masqueradeAll: false }, logger: silentLogger() });
  const web = (eps: Endpoint[]) => lb('shop/web:http', '172.30.0.1', hcWeb, eps);
  const api = (eps: Endpoint[]) => lb('shop/api:http', '172.30.0.2', hcApi, eps);
  let read: SourceRead = { snapshot: onNode(web([local('10.180.0.1:80'), local('10.180.0.2:80'), remote('10.180.1.1:80')]), api([remote('10.180.1.2:80')])) };
  const source = { load: async () => read, watch: () => {}, close: () => {} };
  const proxier = new Proxier({ source, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  const servers = await startServers(proxier, {
    metrics: null,
    healthz: null,
    proxyMode: 'iptables',
    healthCheckAddresses: [LOOPBACK],
    syncPeriodMs: 30_000,
    logger: silentLogger(),
  });
  t.teardown(() => servers.close());
  await t.throwsAsync(() => probe(hcWeb), undefined, 'nothing listens before the first sync');

  await proxier.syncOnce();
  await until('both health checks listen', async () => [...servers.serviceHealth.served().values()].every((s) => s.bound[0] !== undefined), 5000, 20);
  const ok = await probe(hcWeb);
  t.deepEqual(ok, { status: 200, type: 'application/json', nosniff: 'nosniff', weight: '2', body: body('shop', 'web', 2) });
  t.deepEqual(await probe(hcWeb, '/healthz'), ok, 'any path answers');
  t.deepEqual(await probe(hcApi), { status: 503, type: 'application/json', nosniff: 'nosniff', weight: '0', body: body('shop', 'api', 0) });

  // The local endpoints go away (one is terminating), the remote one stays.
  read = { snapshot: onNode(web([local('10.180.0.1:80', { ready: false, serving: true, terminating: true }), remote('10.180.1.1:80')]), api([remote('10.180.1.2:80')])), changed: new Set(['shop/web:http']) };
  await proxier.syncOnce();
  t.deepEqual(await probe(hcWeb), { status: 503, type: 'application/json', nosniff: 'nosniff', weight: '0', body: body('shop', 'web', 0) });

  // The Service goes: its server closes; the other one keeps serving.
  read = { snapshot: onNode(api([local('10.180.0.9:80')])), changed: new Set(['shop/web:http', 'shop/api:http']) };
  await proxier.syncOnce();
  await until('the health check of shop/web is closed', async () => probe(hcWeb).then(() => false, () => true), 5000, 20);
  t.false(servers.serviceHealth.served().has('shop/web'));
  t.deepEqual(await probe(hcApi), { status: 200, type: 'application/json', nosniff: 'nosniff', weight: '1', body: body('shop', 'api', 1) });
});

test('a failed sync changes nothing; an incomplete read closes no health check; a new port reopens it', async (t) => {
  const [first, second] = [await freePort(), await freePort()];
  const hs = new ServiceHealthServer({ addresses: [LOOPBACK], isHealthy: () => true, logger: silentLogger() });
  t.teardown(() => hs.close());
  let listener: ((last: Parameters<Parameters<Proxier['on']>[1]>[0]) => void) | undefined;
  const proxier = { on: (_e: string, l: typeof listener) => ((listener = l), () => {}) } as unknown as Pick<Proxier, 'on'>;
  hs.listen(proxier);
  const sync = async (snapshot: Snapshot | undefined, extra: { error?: string; incomplete?: string[] } = {}) => {
    listener!({ at: Date.now(), full: true, durationMs: 1, incomplete: extra.incomplete ?? [], ...(extra.error ? { error: extra.error } : { snapshot }) });
    await hs.update(new Map(), { keepMissing: true }); // waits for the work queued by the sync
  };
  await sync(onNode(lb('shop/web:http', '172.30.0.1', first, [local('10.180.0.1:80')])));
  t.is((await probe(first)).status, 200);
  await sync(undefined, { error: 'iptables-restore failed' });
  t.is((await probe(first)).status, 200);
  await sync(onNode(), { incomplete: ['shop/web.yaml: unreadable'] });
  t.deepEqual(await probe(first), { status: 200, type: 'application/json', nosniff: 'nosniff', weight: '1', body: body('shop', 'web', 1) });
  await sync(onNode(lb('shop/web:http', '172.30.0.1', second, [local('10.180.0.1:80')])));
  t.is((await probe(second)).status, 200);
  await t.throwsAsync(() => probe(first));
});

test('a port already taken is logged once, naming the Service and the port, and retried until it is free', async (t) => {
  const port = await freePort();
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(port, '127.0.0.1', r));
  const logged: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
  let healthy = true;
  const hs = new ServiceHealthServer({ addresses: [LOOPBACK], isHealthy: () => healthy, logger, retryMs: 100 });
  t.teardown(() => hs.close());
  await hs.update(healthCheckServices(onNode(lb('shop/web:http', '172.30.0.1', port, [local('10.180.0.1:80')]))));
  t.deepEqual(hs.served().get('shop/web')?.bound, [undefined]);
  // The attempts go on, every 100 ms however busy the machine is: wait for two of them.
  await until('two more attempts', async () => logged.filter((l) => l.level === 20 && String(l.msg).startsWith('cannot serve')).length >= 2, 5000, 20);
  const errors = logged.filter((l) => l.level === 50);
  t.is(errors.length, 1, 'one error line, however many attempts');
  t.is(errors[0]!.msg, `cannot serve the health check of Service shop/web on port ${port}; will retry`);
  t.is(errors[0]!.service, 'shop/web');
  t.regex(String(errors[0]!.err), /EADDRINUSE/);

  await new Promise((r) => blocker.close(r));
  await until('the health check listens', async () => hs.served().get('shop/web')?.bound[0] === port, 5000, 20);
  t.is((await probe(port)).status, 200);
  healthy = false;
  t.deepEqual(await probe(port), { status: 503, type: 'application/json', nosniff: 'nosniff', weight: '1', body: body('shop', 'web', 1, false) });
});
