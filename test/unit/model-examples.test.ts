import test from 'ava';
import { silentLogger } from '../../src/util/log.ts';
import { FileSource } from '../../src/sources/file.ts';
import { ipv4Frontends, type ServicePort } from '../../src/model/types.ts';

const ready = { ready: true, serving: true, terminating: false } as const;

const LINKDING: ServicePort = {
  key: 'default/linkding:http',
  namespace: 'default',
  name: 'linkding',
  portName: 'http',
  type: 'ClusterIP',
  clusterIP: '10.96.0.80',
  clusterIPAllocated: false,
  frontends: ipv4Frontends('10.96.0.80'),
  port: 80,
  protocol: 'TCP',
  sessionAffinity: null,
  internalTrafficPolicy: 'Cluster',
  externalTrafficPolicy: 'Cluster',
  endpoints: [
    { ip: '10.244.1.2', port: 9090, ...ready, nodeName: 'kind-worker', zone: 'zone-a', zoneHints: ['zone-a'] },
    { ip: '10.244.1.3', port: 9090, ...ready, nodeName: 'kind-worker', zone: 'zone-a', zoneHints: ['zone-a'] },
  ],
};

const WEB_SERVICE: ServicePort = {
  key: 'default/web-service:http',
  namespace: 'default',
  name: 'web-service',
  portName: 'http',
  type: 'ClusterIP',
  clusterIP: '10.107.148.169',
  clusterIPAllocated: true,
  frontends: ipv4Frontends('10.107.148.169'),
  port: 80,
  protocol: 'TCP',
  sessionAffinity: null,
  internalTrafficPolicy: 'Cluster',
  externalTrafficPolicy: 'Cluster',
  endpoints: [
    { ip: '10.244.2.2', port: 8080, ...ready },
    { ip: '10.244.2.3', port: 8080, ...ready },
    { ip: '10.244.2.4', port: 8080, ...ready },
  ],
};

const SHOP: ServicePort = {
  ...LINKDING,
  key: 'default/shop:http',
  name: 'shop',
  clusterIP: '10.96.0.90',
  frontends: ipv4Frontends('10.96.0.90'),
  endpoints: [
    { ip: '10.244.3.2', port: 8080, ...ready, nodeName: 'node-1', pod: 'default/shop-1' },
    { ip: '10.244.3.3', port: 8080, ...ready, nodeName: 'node-1', pod: 'default/shop-2' },
    { ip: '10.244.3.4', port: 8081, ...ready, nodeName: 'node-1', pod: 'default/shop-canary' },
  ],
};

const load = (path: string) => new FileSource(path, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() }).load();

test('examples/kubernetes.yaml: linkding only (the headless linkding-db is not proxied)', async (t) => {
  const r = await load('examples/kubernetes.yaml');
  t.deepEqual(r.errors, []);
  t.deepEqual(r.warnings, []);
  t.deepEqual(r.allocations, []);
  t.deepEqual([...r.snapshot.services], [['default/linkding:http', LINKDING]]);
});

test('examples/shepherd.json: web-service with an allocated ClusterIP', async (t) => {
  const r = await load('examples/shepherd.json');
  t.deepEqual(r.errors, []);
  t.deepEqual(r.allocations, [{ key: 'default/web-service', clusterIP: '10.107.148.169' }]);
  t.deepEqual([...r.snapshot.services], [['default/web-service:http', WEB_SERVICE]]);
});

test('examples/pods: the endpoints of Service shop come from its Pods, the named targetPort resolved per Pod, the Succeeded one left out', async (t) => {
  const r = await load('examples/pods');
  t.deepEqual([r.errors, r.warnings], [[], []]);
  t.deepEqual([...r.snapshot.services], [['default/shop:http', SHOP]]);
});

test('examples/ as a folder: every service, sorted by key', async (t) => {
  const r = await load('examples');
  t.deepEqual(r.errors, []);
  t.deepEqual([...r.snapshot.services], [
    ['default/linkding:http', LINKDING],
    ['default/shop:http', SHOP],
    ['default/web-service:http', WEB_SERVICE],
  ]);
});
