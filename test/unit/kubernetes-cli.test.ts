/**
 * `drover render --source kubernetes --kubeconfig F`, as a user runs it,
 * against the API server double: the rules are exactly those of the same
 * objects read from a manifest file; an API server that never answers is
 * one clear error after --list-timeout.
 */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { run } from '../../src/kernel/exec.ts';
import { FakeKubeApi, type ApiObject } from '../support/kube-api.ts';
import { node, service, slice } from '../support/kube-objects.ts';
import { DROVER } from '../support/drover-bin.ts';

const drover = (args: string[]) => run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 100_000 });

let dir: string;
test.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'drover-k8s-cli-'));
});
test.after.always(async () => {
  await rm(dir, { recursive: true, force: true });
});

const OBJECTS: ApiObject[] = [
  service('web', '10.96.0.10'),
  slice('web-1', 'web', ['10.244.1.1', '10.244.1.2']),
  node('node-a', 'zone-a'),
];

test.serial('render --source kubernetes prints the rules of the same objects read from a file', async (t) => {
  const api = await FakeKubeApi.start();
  t.teardown(() => api.close());
  for (const o of OBJECTS) api.apply(o);
  // Not drover's: another proxy's Service, and another Node.
  api.apply(service('other', '10.96.0.20', { labels: { 'service.kubernetes.io/service-proxy-name': 'x' } }));
  api.apply(node('node-b', 'zone-b'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, api.kubeconfig());
  const manifests = join(dir, 'objects.yaml');
  await writeFile(manifests, OBJECTS.map((o) => stringify(o)).join('---\n'));

  const common = ['--cluster-cidr', '10.244.0.0/16', '--hostname-override', 'Node-A '];
  const fromApi = await drover(['render', '--source', 'kubernetes', '--kubeconfig', kubeconfig, ...common]);
  const fromFile = await drover(['render', '--source', manifests, ...common]);
  t.is(fromApi.code, 0, fromApi.stderr);
  t.is(fromApi.stderr, '');
  t.is(fromFile.code, 0, fromFile.stderr);
  t.is(fromApi.stdout, fromFile.stdout);
  const lines = fromApi.stdout.split('\n');
  t.true(lines.includes('# default/web:http: ClusterIP 10.96.0.10:80/TCP (from the manifest), 2 ready of 2 endpoints'), fromApi.stdout);
  t.true(lines.some((l) => l.startsWith('-A KUBE-SERVICES ') && l.includes('default/web:http cluster IP') && l.includes('-d 10.96.0.10/32')));
  t.true(lines.some((l) => l.includes('-j DNAT --to-destination 10.244.1.2:8080')));
  t.false(fromApi.stdout.includes('10.96.0.20'), 'the other proxy\'s Service is not rendered');
});

test.serial("render --source kubernetes serves a NodePort outside 30000-32767, which the API server's own range allowed; --service-node-port-range given still holds it to that range", async (t) => {
  const api = await FakeKubeApi.start();
  t.teardown(() => api.close());
  const wide = service('wide', '10.96.0.30') as ApiObject & { spec: Record<string, unknown> };
  wide.spec = { ...wide.spec, type: 'NodePort', ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 40000 }] };
  for (const o of [wide, slice('wide-1', 'wide', ['10.244.1.5']), node('node-a', 'zone-a')]) api.apply(o);
  const kubeconfig = join(dir, 'kubeconfig-wide');
  await writeFile(kubeconfig, api.kubeconfig());
  const common = ['--source', 'kubernetes', '--kubeconfig', kubeconfig, '--cluster-cidr', '10.244.0.0/16', '--hostname-override', 'node-a'];
  const served = await drover(['render', ...common]);
  t.is(served.code, 0, served.stderr);
  t.is(served.stderr, '');
  t.true(served.stdout.split('\n').some((l) => l.startsWith('-A KUBE-NODEPORTS ') && l.includes('--dport 40000')), served.stdout);
  const held = await drover(['render', ...common, '--service-node-port-range', '30000-32767']);
  t.is(held.code, 0, held.stderr);
  t.regex(held.stderr, /spec\.ports\[0\]\.nodePort.*40000 is outside the NodePort range 30000-32767/);
  t.false(held.stdout.includes('--dport 40000'), held.stdout);
});

test.serial('render --source kubernetes fails with one clear line when the first lists do not come within --list-timeout', async (t) => {
  const api = await FakeKubeApi.start();
  t.teardown(() => api.close());
  api.holdLists('nodes');
  // 5 s: long enough for the lists that are answered to arrive on a busy machine.
  const kubeconfig = join(dir, 'kubeconfig-held');
  await writeFile(kubeconfig, api.kubeconfig());
  const r = await drover(['render', '--source', 'kubernetes', '--kubeconfig', kubeconfig, '--hostname-override', 'node-a', '--list-timeout', '5s']);
  t.is(r.code, 1);
  t.is(r.stdout, '');
  t.is(r.stderr, `drover: timed out after 5 s waiting for the first lists from the Kubernetes API server at ${api.url}: Nodes not listed yet\n`);
});

test.serial('render --source kubernetes with a kubeconfig that does not exist names it', async (t) => {
  const missing = join(dir, 'nope');
  const r = await drover(['render', '--source', 'kubernetes', '--kubeconfig', missing]);
  t.is(r.code, 1);
  t.is(r.stderr, `drover: kubeconfig ${missing} (--kubeconfig) not found; give --kubeconfig, set $KUBECONFIG, or run drover in a pod\n`);
});
