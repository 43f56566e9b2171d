/** The deployment files: the DaemonSet's RBAC grants exactly what the Kubernetes source reads, and every command line they hold is one drover takes. */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { buildProgram } from '../../src/cli/program.ts';
import { INFORMER_VERBS, RESOURCES } from '../../src/sources/kubernetes/informer.ts';
import { loadKubeConfig, SERVICE_ACCOUNT_TOKEN } from '../../src/sources/kubernetes/config.ts';

const ROOT = new URL('../../', import.meta.url);
type Obj = { kind: string; metadata: { name: string; namespace?: string }; [k: string]: unknown };
const objects = parseAllDocuments(readFileSync(new URL('deploy/kubernetes/drover.yaml', ROOT), 'utf8')).map((d) => d.toJS() as Obj);
const find = (kind: string, name?: string) => objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name))!;
const daemonSetText = readFileSync(new URL('deploy/kubernetes/drover.yaml', ROOT), 'utf8');

/** The options `drover <args>` gets, or the error commander throws. */
async function parsed(args: string[]): Promise<Record<string, unknown>> {
  const program = buildProgram().exitOverride();
  let opts: Record<string, unknown> | undefined;
  for (const c of program.commands) c.exitOverride().action(async (o: Record<string, unknown>) => void (opts = o));
  await program.parseAsync(['node', 'drover', ...args]);
  if (!opts) throw new Error(`no command ran for ${args.join(' ')}`);
  return opts;
}

test('the ClusterRole grants exactly the verbs and resources the Kubernetes source uses', (t) => {
  const role = find('ClusterRole') as Obj & { rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> };
  const granted = new Set(role.rules.flatMap((r) => r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g}/${res}:${v}`)))));
  const used = new Set(
    Object.values(RESOURCES).flatMap((r) => {
      const group = r.apiVersion.includes('/') ? r.apiVersion.split('/')[0]! : '';
      const resource = r.path.split('/').at(-1)!;
      return INFORMER_VERBS.map((v) => `${group}/${resource}:${v}`);
    }),
  );
  t.deepEqual([...granted].sort(), [...used].sort());
  t.deepEqual([...used].sort(), ['/nodes:list', '/nodes:watch', '/services:list', '/services:watch', 'discovery.k8s.io/endpointslices:list', 'discovery.k8s.io/endpointslices:watch']);
});

test('the binding gives the role to the service account the DaemonSet runs as', (t) => {
  const binding = find('ClusterRoleBinding') as Obj & { roleRef: { kind: string; name: string }; subjects: Array<{ kind: string; name: string; namespace: string }> };
  const sa = find('ServiceAccount');
  const ds = find('DaemonSet') as Obj & { spec: { template: { spec: { serviceAccountName: string } } } };
  t.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: find('ClusterRole').metadata.name });
  t.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace! }]);
  t.is(ds.spec.template.spec.serviceAccountName, sa.metadata.name);
  t.is(ds.metadata.namespace, sa.metadata.namespace);
});

test('the DaemonSet runs on the host network, privileged, with the xtables lock and the kernel modules, and a command drover takes, with --takeover', async (t) => {
  const ds = find('DaemonSet') as Obj & { spec: { template: { spec: Record<string, any> } } };
  const pod = ds.spec.template.spec;
  t.true(pod.hostNetwork);
  const [c] = pod.containers;
  t.true(c.securityContext.privileged);
  const mounts = new Map(c.volumeMounts.map((m: { name: string; mountPath: string }) => [m.mountPath, m.name]));
  const volumes = new Map(pod.volumes.map((v: { name: string; hostPath?: { path: string } }) => [v.name, v.hostPath?.path]));
  t.is(volumes.get(mounts.get('/run/xtables.lock')), '/run/xtables.lock');
  t.is(volumes.get(mounts.get('/lib/modules')), '/lib/modules');
  t.is(c.livenessProbe.httpGet.path, '/livez');
  t.is(c.readinessProbe.httpGet.path, '/healthz');
  const [, ...args] = (c.command as string[]).map((a) => a.replace('$(NODE_NAME)', 'node-a'));
  const opts = await parsed(args);
  t.like(opts, { source: 'kubernetes', config: '/etc/drover/config.yaml', hostnameOverride: 'node-a', stateDir: '/var/lib/drover', takeover: true });
  const config = find('ConfigMap', 'drover') as Obj & { data: Record<string, string> };
  t.true(config.data['config.yaml']!.includes('kind: KubeProxyConfiguration'));
});

test("the systemd unit's ExecStart is a command drover takes, and SIGHUP reloads", async (t) => {
  const unit = readFileSync(new URL('deploy/systemd/drover.service', ROOT), 'utf8');
  const exec = /^ExecStart=(\S+) (.*)$/m.exec(unit)!;
  t.is(exec[1], '/opt/drover/bin/drover.js');
  t.like(await parsed(exec[2]!.split(' ')), { config: '/etc/drover/kube-proxy.yaml', source: 'kubernetes', stateDir: '/var/lib/drover' });
  t.regex(unit, /^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
  t.regex(unit, /^Restart=on-failure$/m);
  t.regex(unit, /^KillSignal=SIGTERM$/m);
});

test('the pod reaches the API server at the control-plane endpoint from a ConfigMap to edit, not through the kubernetes Service', (t) => {
  const ds = find('DaemonSet') as Obj & { spec: { template: { spec: Record<string, any> } } };
  const [c] = ds.spec.template.spec.containers;
  const api = find('ConfigMap', 'drover-api-server') as Obj & { data: Record<string, string> };
  t.deepEqual(c.envFrom, [{ configMapRef: { name: api.metadata.name } }]);
  t.is(api.metadata.namespace, ds.metadata.namespace);
  t.deepEqual(Object.keys(api.data).sort(), ['KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT']);
  t.regex(daemonSetText, /# EDIT: your control-plane endpoint[^\n]*\n(#[^\n]*\n)*apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: drover-api-server\n/);
  // What drover makes of it in the pod: the in-cluster configuration, at that address, with the service account's token.
  const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
  try {
    process.env.KUBERNETES_SERVICE_HOST = api.data.KUBERNETES_SERVICE_HOST;
    process.env.KUBERNETES_SERVICE_PORT = api.data.KUBERNETES_SERVICE_PORT;
    const loaded = loadKubeConfig({ exists: (path) => path === SERVICE_ACCOUNT_TOKEN });
    t.is(loaded.from, 'in-cluster');
    t.is(loaded.server, `https://${api.data.KUBERNETES_SERVICE_HOST}:${api.data.KUBERNETES_SERVICE_PORT}`);
  } finally {
    for (const [name, value] of [['KUBERNETES_SERVICE_HOST', saved.host], ['KUBERNETES_SERVICE_PORT', saved.port]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
});

test("the memory limit is above drover's measured peak at 30,000 services, and the image, the API server and clusterCIDR are marked to edit", (t) => {
  const ds = find('DaemonSet') as Obj & { spec: { template: { spec: Record<string, any> } } };
  const [c] = ds.spec.template.spec.containers;
  const bytes = (q: string) => Number(/^(\d+)(Mi|Gi)$/.exec(q)![1]) * (q.endsWith('Gi') ? 2 ** 30 : 2 ** 20);
  // The peak RSS column of the bench's `drover run` table (VmHWM, kB).
  const bench = readFileSync(new URL('docs/bench/nftables/summary.md', ROOT), 'utf8');
  const peaks = [...bench.matchAll(/^\| (iptables \(nft\)|nftables \(netlink\)) \| (\d+) \| dist \| [^|]+\| [^|]+\| ([\d,]+) kB \|$/gm)].map((m) => ({ mode: m[1], services: Number(m[2]), kB: Number(m[3]!.replaceAll(',', '')) }));
  t.true(peaks.some((p) => p.services === 30000 && p.mode === 'iptables (nft)'), 'the bench measured 30,000 services in iptables mode');
  const highest = Math.max(...peaks.map((p) => p.kB * 1024));
  t.true(bytes(c.resources.limits.memory) >= highest * 1.2, `the limit ${c.resources.limits.memory} leaves 20% over the highest peak, ${highest} bytes`);
  t.true(bytes(c.resources.requests.memory) <= bytes(c.resources.limits.memory));
  t.regex(c.image, /^[a-z0-9.-]+\.[a-z]+\/drover:\d+\.\d+\.\d+$/, 'the image names a registry');
  t.regex(daemonSetText, /# EDIT: the image[^\n]*\n\s+image: /);
  t.regex(daemonSetText, /# EDIT: your pod network[^\n]*\n(\s+#[^\n]*\n)*\s+clusterCIDR: /);
});

test("the Dockerfile's build stage has every input of npm run build, and the image holds the compiled output and production dependencies only", (t) => {
  const docker = readFileSync(new URL('deploy/Dockerfile', ROOT), 'utf8');
  const stages = docker.split(/^FROM /m).slice(1).map((s) => s.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#')));
  t.is(stages.length, 2);
  const [build, image] = stages as [string[], string[]];
  t.regex(build[0]!, / AS build$/);
  const copied = (stage: string[]) => stage.filter((l) => l.startsWith('COPY ') && !l.includes('--from')).flatMap((l) => l.split(/\s+/).slice(1, -1));
  // npm run build: tsc on tsconfig.build.json (which extends tsconfig.json and compiles src/), then scripts/build-copy.ts.
  const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { scripts: Record<string, string> };
  t.is(pkg.scripts.build, 'tsc -p tsconfig.build.json && tsx scripts/build-copy.ts');
  for (const input of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'scripts/build-copy.ts', 'src']) t.true(copied(build).includes(input), `the build stage copies ${input}`);
  t.true(build.includes('RUN npm ci --no-audit --no-fund'));
  t.true(build.includes('RUN npm run build'));
  // The image: production dependencies, the compiled output from the build stage, the launcher and the static rules; no sources, no tests.
  t.true(image.some((l) => /^RUN npm ci --omit=dev /.test(l)));
  t.deepEqual(copied(image).sort(), ['bin', 'package-lock.json', 'package.json', 'rules']);
  t.true(image.includes('COPY --from=build /src/dist dist'));
  t.true(image.some((l) => /^ENV .*DROVER_ENTRY=dist/.test(l)), 'the compiled CLI, never the sources');
  t.is(image.at(-1), 'ENTRYPOINT ["/opt/drover/bin/drover.js"]');
});

test('the systemd unit keeps only the capabilities drover needs, with the usual hardening, and systemd-analyze rates it OK', (t) => {
  const unit = readFileSync(new URL('deploy/systemd/drover.service', ROOT), 'utf8');
  const settings = new Map([...unit.matchAll(/^(\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));
  t.is(settings.get('CapabilityBoundingSet'), 'CAP_NET_ADMIN CAP_NET_RAW');
  t.is(settings.get('AmbientCapabilities'), 'CAP_NET_ADMIN CAP_NET_RAW');
  for (const [key, value] of [
    ['NoNewPrivileges', 'yes'],
    ['ProtectSystem', 'strict'],
    ['ProtectHome', 'yes'],
    ['PrivateTmp', 'yes'],
    ['RestrictAddressFamilies', 'AF_UNIX AF_INET AF_INET6 AF_NETLINK'],
    ['SystemCallFilter', '@system-service'],
    ['ReadWritePaths', '-/run/xtables.lock'],
    ['StateDirectory', 'drover'],
    ['RuntimeDirectory', 'drover'],
  ] as const) {
    t.is(settings.get(key), value, key);
  }
  t.false(settings.has('ProtectKernelTunables'), 'drover writes net.* sysctls');
  t.false(settings.has('MemoryDenyWriteExecute'), "Node's JIT needs writable executable memory");
  // drover writes only under its state and runtime directories and the xtables lock.
  t.true(['--state-dir /var/lib/drover', '--status-file /run/drover/'].every((flag) => settings.get('ExecStart')!.includes(flag)));
  const analyze = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((p) => existsSync(p));
  if (analyze === undefined) return t.log('systemd-analyze not installed: exposure not rated');
  const dir = mkdtempSync(join(tmpdir(), 'drover-unit-'));
  try {
    copyFileSync(new URL('deploy/systemd/drover.service', ROOT), join(dir, 'drover.service'));
    const r = spawnSync(analyze, ['security', '--offline=true', 'drover.service'], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
    const exposure = Number(/Overall exposure level for drover\.service: ([\d.]+)/.exec(r.stdout)?.[1]);
    t.true(exposure <= 3, `exposure ${exposure} (systemd-analyze security), at most 3.0: ${r.stdout.split('\n').at(-2)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the package ships the compiled output, the launcher, the rules and the deployment files, built before packing; no sources, no tests', (t) => {
  const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { description: string; files: string[]; scripts: Record<string, string>; bin: Record<string, string> };
  t.deepEqual(pkg.files, ['bin/', 'dist/', 'rules/', 'deploy/', 'docs/install.md', 'docs/metrics.md']);
  t.is(pkg.scripts.prepack, 'npm run build', 'npm pack and npm publish build dist/ first, so that an install runs compiled JavaScript');
  t.is(pkg.bin.drover, 'bin/drover.js');
  t.regex(pkg.description, /iptables, IPVS or nftables/);
  for (const path of pkg.files.filter((p) => p !== 'dist/')) t.true(existsSync(new URL(path, ROOT)), path);
});
