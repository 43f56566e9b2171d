/**
 * drover's credentials on the real API server, as a cluster gives them:
 * the ServiceAccount, ClusterRole and ClusterRoleBinding of
 * deploy/kubernetes/drover.yaml applied as they are, a token for the
 * ServiceAccount from the TokenRequest API (what the kubelet mounts into
 * drover's pod), and a kubeconfig carrying it.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { Obj, TestApiServer } from './apiserver.ts';
import { ROOT } from './peers.ts';

/** deploy/kubernetes/drover.yaml. */
export const DEPLOY_MANIFEST = join(ROOT, 'deploy/kubernetes/drover.yaml');

/** The collection path of each kind this module writes. */
const PATHS: Record<string, (o: Obj) => string> = {
  ServiceAccount: (o) => `/api/v1/namespaces/${o.metadata!.namespace ?? 'default'}/serviceaccounts`,
  ClusterRole: () => '/apis/rbac.authorization.k8s.io/v1/clusterroles',
  ClusterRoleBinding: () => '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
};

/** The documents of deploy/kubernetes/drover.yaml of the given kinds. */
export async function deployObjects(kinds: readonly string[] = Object.keys(PATHS)): Promise<Obj[]> {
  const docs = parseAllDocuments(await readFile(DEPLOY_MANIFEST, 'utf8')).map((d) => d.toJS() as Obj);
  return docs.filter((d) => kinds.includes(d.kind as string));
}

/** Create `o` (a ServiceAccount, ClusterRole or ClusterRoleBinding) as the admin. */
export async function create(api: TestApiServer, o: Obj): Promise<void> {
  const path = PATHS[o.kind as string];
  if (path === undefined) throw new Error(`rbac: cannot create a ${String(o.kind)}`);
  await api.must('POST', path(o), o);
}

/** Apply the ServiceAccount, ClusterRole and ClusterRoleBinding of deploy/kubernetes/drover.yaml, unchanged. */
export async function applyDeployRbac(api: TestApiServer): Promise<void> {
  for (const o of await deployObjects()) await create(api, o);
}

/**
 * A ServiceAccount `name` in kube-system bound to a copy of deploy/'s
 * ClusterRole from which `verb` on `resource` is removed (the same name
 * for the role and its binding).
 */
export async function applyRoleWithout(api: TestApiServer, name: string, resource: string, verb: string): Promise<void> {
  const [sa, role, binding] = await deployObjects();
  const rules = (role!.rules as Array<{ resources: string[]; verbs: string[] }>).map((r) => (r.resources.includes(resource) ? { ...r, verbs: r.verbs.filter((v) => v !== verb) } : r));
  await create(api, { ...sa!, metadata: { ...sa!.metadata, name } });
  await create(api, { ...role!, metadata: { name }, rules });
  await create(api, { ...binding!, metadata: { name }, roleRef: { ...(binding!.roleRef as object), name }, subjects: [{ kind: 'ServiceAccount', name, namespace: 'kube-system' }] });
}

/** A token of ServiceAccount `ns/name` from the TokenRequest API, valid for an hour. */
export async function serviceAccountToken(api: TestApiServer, ns: string, name: string): Promise<string> {
  const r = await api.must<{ status: { token: string } }>('POST', `/api/v1/namespaces/${ns}/serviceaccounts/${name}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  return r.status.token;
}

/** Write a kubeconfig for the API server with `token` to `path`; returns `path`. */
export async function writeKubeconfig(api: TestApiServer, token: string, path: string): Promise<string> {
  const { server, ca } = api.state;
  await writeFile(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: test',
      '  cluster:',
      `    server: ${server}`,
      `    certificate-authority: ${ca}`,
      'users:',
      '- name: drover',
      '  user:',
      `    token: ${token}`,
      'contexts:',
      '- name: test',
      '  context: {cluster: test, user: drover}',
      'current-context: test',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return path;
}
