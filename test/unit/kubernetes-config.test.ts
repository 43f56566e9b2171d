/** Where the Kubernetes source finds its kubeconfig: --kubeconfig, in-cluster, $KUBECONFIG, ~/.kube/config, in that order. */
import test from 'ava';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKubeConfig, SERVICE_ACCOUNT_TOKEN } from '../../src/sources/kubernetes/config.ts';
import { kubeconfigFor } from '../support/kube-api.ts';

let dir: string;
let flag: string;
let env: string;
let home: string;
test.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'drover-kubeconfig-'));
  flag = join(dir, 'flag');
  env = join(dir, 'env');
  home = join(dir, 'home');
  await writeFile(flag, kubeconfigFor('http://127.0.0.1:1001'));
  await writeFile(env, kubeconfigFor('http://127.0.0.1:1002'));
  await mkdir(join(home, '.kube'), { recursive: true });
  await writeFile(join(home, '.kube', 'config'), kubeconfigFor('http://127.0.0.1:1003'));
});
test.after.always(() => rm(dir, { recursive: true, force: true }));

const inPod = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
const NAMES = ['KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT', 'KUBECONFIG'] as const;

/** Run `f` with exactly `vars` of {@link NAMES} set in process.env. */
function withEnv<T>(vars: Partial<Record<(typeof NAMES)[number], string>>, f: () => T): T {
  const saved = NAMES.map((n) => [n, process.env[n]] as const);
  for (const n of NAMES) delete process.env[n];
  Object.assign(process.env, vars);
  try {
    return f();
  } finally {
    for (const [n, v] of saved) {
      if (v === undefined) delete process.env[n];
      else process.env[n] = v;
    }
  }
}
const podFiles = (p: string) => p === SERVICE_ACCOUNT_TOKEN || existsSync(p);

test.serial('--kubeconfig wins, even in a pod', (t) => {
  const c = withEnv({ ...inPod, KUBECONFIG: env }, () => loadKubeConfig({ kubeconfig: flag, home, exists: podFiles }));
  t.deepEqual([c.from, c.server], [flag, 'http://127.0.0.1:1001']);
});

test.serial('in a pod, the in-cluster configuration', (t) => {
  const c = withEnv({ ...inPod, KUBECONFIG: env }, () => loadKubeConfig({ home, exists: podFiles }));
  t.deepEqual([c.from, c.server], ['in-cluster', 'https://10.96.0.1:443']);
});

test.serial('elsewhere $KUBECONFIG (its first file), then ~/.kube/config', (t) => {
  t.is(withEnv({ KUBECONFIG: `${env}:${flag}` }, () => loadKubeConfig({ home })).server, 'http://127.0.0.1:1002');
  t.is(withEnv({}, () => loadKubeConfig({ home })).server, 'http://127.0.0.1:1003');
  // The service variables without a service account token are not a pod.
  t.is(withEnv(inPod, () => loadKubeConfig({ home })).server, 'http://127.0.0.1:1003');
});

test.serial('a missing or broken kubeconfig is one error naming it', async (t) => {
  const missing = join(dir, 'missing');
  t.throws(() => withEnv({}, () => loadKubeConfig({ kubeconfig: missing })), {
    message: `kubeconfig ${missing} (--kubeconfig) not found; give --kubeconfig, set $KUBECONFIG, or run drover in a pod`,
  });
  const broken = join(dir, 'broken');
  await writeFile(broken, 'clusters: [\n');
  t.throws(() => loadKubeConfig({ kubeconfig: broken }), { message: new RegExp(`^kubeconfig ${broken} \\(--kubeconfig\\): `) });
  const empty = join(dir, 'empty');
  await writeFile(empty, 'apiVersion: v1\nkind: Config\n');
  t.throws(() => loadKubeConfig({ kubeconfig: empty }), { message: /no cluster for the current context/ });
});
