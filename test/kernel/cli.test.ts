/**
 * The drover command end to end: render, run (file watching and the sync
 * loop) and cleanup, as a user runs them, in a fresh network namespace.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { until } from '../support/wait.ts';
import { DROVER } from '../support/drover-bin.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const unavailable = await testbedUnavailableReason();

const drover = (args: string[]) => run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 60_000 });

test('render prints the ruleset for the examples and needs no root', async (t) => {
  const res = await drover(['render', '--source', join(ROOT, 'examples'), '--cluster-cidr', '10.244.0.0/16']);
  t.is(res.code, 0, res.stderr);
  t.is(res.stderr, '');
  t.regex(res.stdout, /^# default\/web-service:http: ClusterIP 10\.\d+\.\d+\.\d+:80\/TCP \(allocated by drover\), 3 ready of 3 endpoints$/m);
  t.regex(res.stdout, /^-A KUBE-SERVICES -d 10\.96\.0\.80\/32 -p tcp -m comment --comment "default\/linkding:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-\w{16}$/m);
  t.regex(res.stdout, /-j DNAT --to-destination 10\.244\.1\.3:9090$/m);
});

/** Run `fn` on a copy of examples/ with one more file, bad.yaml, whose Service default/evil has port 70000. */
async function withBadExample(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-cli-'));
  try {
    await cp(join(ROOT, 'examples'), dir, { recursive: true });
    await writeFile(
      join(dir, 'bad.yaml'),
      'apiVersion: v1\nkind: Service\nmetadata: {name: evil, namespace: default}\nspec:\n  clusterIP: 10.96.0.99\n  ports: [{name: http, port: 70000, protocol: TCP}]\n',
    );
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const BAD_OBJECT = /bad\.yaml.*Service default\/evil.*spec\.ports\[0\]\.port.*70000/;

test('render names a bad object, skips it, renders the rest and exits 3', async (t) => {
  await withBadExample(async (dir) => {
    const res = await drover(['render', '--source', dir]);
    t.is(res.code, 3);
    t.regex(res.stderr, BAD_OBJECT);
    t.true(res.stdout.includes('default/linkding:http cluster IP'));
    t.false(res.stdout.includes('evil'));
  });
});

test('render --mode ipvs names a bad object, skips it, renders the rest in every section and exits 3; no root needed', async (t) => {
  await withBadExample(async (dir) => {
    const res = await drover(['render', '--mode', 'ipvs', '--ipvs-scheduler', 'wrr', '--source', dir, '--cluster-cidr', '10.244.0.0/16']);
    t.is(res.code, 3);
    t.regex(res.stderr, BAD_OBJECT);
    for (const line of [
      '# default/linkding:http: ClusterIP 10.96.0.80:80/TCP (from the manifest), 2 ready of 2 endpoints',
      'add KUBE-CLUSTER-IP 10.96.0.80,tcp:80',
      'add KUBE-LOOP-BACK 10.244.1.2,tcp:9090,10.244.1.2',
      '10.96.0.80/32',
      '-A -t 10.96.0.80:80 -s wrr',
      '-a -t 10.96.0.80:80 -r 10.244.1.2:9090 -m -w 1',
    ]) {
      t.true(res.stdout.split('\n').includes(line), line);
    }
    t.false(res.stdout.includes('10.96.0.99'));
  });
});

test('render serves the valid endpoints of a slice with a bad address and warns about it and about an unmatched port; no root needed', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-cli-'));
  try {
    const file = join(dir, 'nsd.yaml');
    await writeFile(
      file,
      'apiVersion: v1\nkind: Service\nmetadata: {name: good, namespace: nsd}\nspec:\n  clusterIP: 10.96.7.7\n  ports: [{name: http, port: 80}]\n---\n' +
        'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: good-1, namespace: nsd, labels: {kubernetes.io/service-name: good}}\n' +
        'addressType: IPv4\nendpoints: [{addresses: ["10.180.0.999"]}, {addresses: [10.180.2.01]}]\nports: [{name: http, port: 8080}, {name: htp, port: 8081}]\n',
    );
    const res = await drover(['render', '--source', dir]);
    t.is(res.code, 0, res.stderr);
    t.deepEqual(res.stderr.trimEnd().split('\n'), [
      `drover: ${file}: EndpointSlice nsd/good-1: endpoints[0].addresses[0]: "10.180.0.999" is not a valid IPv4 address; endpoint ignored`,
      `drover: ${file}: EndpointSlice nsd/good-1: endpoints[1].addresses[0]: "10.180.2.01" has leading zeros; read as 10.180.2.1, as kube-proxy does`,
      `drover: ${file}: EndpointSlice nsd/good-1: endpoint port "htp" matches no port of Service nsd/good (its port: "http"); endpoint port ignored`,
    ]);
    const lines = res.stdout.split('\n');
    t.true(lines.includes('# nsd/good:http: ClusterIP 10.96.7.7:80/TCP (from the manifest), 1 ready of 1 endpoints'), res.stdout);
    t.is(lines.filter((l) => l.includes('-j DNAT')).length, 1);
    t.regex(res.stdout, /^-A KUBE-SEP-\w{16} -p tcp -m comment --comment "nsd\/good:http" -m tcp -j DNAT --to-destination 10\.180\.2\.1:8080$/m);
    t.false(res.stdout.includes('REJECT'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('bad flags are one clear line and exit 1', async (t) => {
  const res = await drover(['render', '--source', 'examples', '--cluster-cidr', '10.0.0.0/33']);
  t.is(res.code, 1);
  t.regex(res.stderr.split('\n')[0]!, /^drover: .*10\.0\.0\.0\/33.*not a valid IPv4 CIDR/);
  const missing = await drover(['render', '--source', '/nonexistent/drover']);
  t.is(missing.code, 1);
  t.regex(missing.stderr, /^drover: .*\/nonexistent\/drover/);
});

(unavailable ? test.skip : test)('--mode ipvs on a kernel without IPVS is one line and exit 1', async (t) => {
  // In a throw-away network namespace, so that a kernel with IPVS is not touched either.
  const state = await mkdtemp(join(tmpdir(), 'drover-cli-state-'));
  t.teardown(() => rm(state, { recursive: true, force: true }));
  const ipvs = await run('unshare', ['-n', process.execPath, DROVER, 'sync', '--once', '--source', 'examples', '--state-dir', state, '--mode', 'ipvs'], {
    allowFail: true,
    timeoutMs: 60_000,
  });
  if (!/IPVS is not available/.test(ipvs.stderr)) {
    t.is(ipvs.code, 0, `this kernel has IPVS, so the sync must succeed: ${ipvs.stderr}`);
    return;
  }
  t.is(ipvs.code, 1);
  t.is(ipvs.stderr.trim().split('\n').length, 1);
  t.regex(ipvs.stderr, /^drover: --mode ipvs: IPVS is not available in this kernel .*; use --mode iptables$/m);
});

test('render refuses a NodePort outside --service-node-port-range with one line, exits 0, and serves the rest of the Service', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-cli-'));
  try {
    await writeFile(
      join(dir, 'ssh.yaml'),
      'apiVersion: v1\nkind: Service\nmetadata: {name: ssh, namespace: default}\nspec:\n  type: NodePort\n  clusterIP: 10.96.0.60\n  ports: [{name: http, port: 80, protocol: TCP, nodePort: 22}]\n',
    );
    const res = await drover(['render', '--source', dir]);
    t.is(res.code, 0, res.stderr);
    t.is(res.stderr, `drover: ${join(dir, 'ssh.yaml')}: Service default/ssh: spec.ports[0].nodePort: 22 is outside the NodePort range 30000-32767 (--service-node-port-range); NodePort not served\n`);
    t.regex(res.stdout, /-d 10\.96\.0\.60\/32 .*--dport 80 /);
    t.notRegex(res.stdout, /--dport 22 /);
    const wide = await drover(['render', '--source', dir, '--service-node-port-range', '1-32767']);
    t.deepEqual([wide.code, wide.stderr], [0, '']);
    t.regex(wide.stdout, /^-A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "default\/ssh:http has no endpoints" -m addrtype --dst-type LOCAL -m tcp --dport 22 -j REJECT/m);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('--help lists every command and option', async (t) => {
  const top = await drover(['--help']);
  for (const c of ['run', 'sync', 'render', 'cleanup']) t.regex(top.stdout, new RegExp(`^  ${c} `, 'm'));
  const runHelp = await drover(['run', '--help']);
  for (const o of ['--source', '--mode', '--cluster-cidr', '--masquerade-all', '--min-sync-period', '--sync-period', '--iptables-backend', '--poll-interval', '--state-dir', '--service-node-port-range']) {
    t.true(runHelp.stdout.includes(o), o);
  }
});

if (unavailable) {
  test.skip(`drover run tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('run applies the manifests, follows edits within the min sync period, keeps rules on exit; cleanup removes them', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-cli-'));
    await cp(join(ROOT, 'examples'), dir, { recursive: true });
    try {
      await withNetns(async (netns) => {
        const save = async () => (await run('iptables-nft-save', ['-t', 'nat'], { netns })).stdout;
        // With --netns the servers would listen on the host (the health server on every address): off.
        const serversOff = ['--metrics-bind-address', '', '--healthz-bind-address', ''];
        const child = spawn(process.execPath, [DROVER, 'run', '--source', dir, '--state-dir', `${dir}.state`, '--netns', netns, '--iptables-backend', 'nft', '--min-sync-period', '500ms', '--status-file', `${dir}.status.json`, ...serversOff], {
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let logs = '';
        child.stderr.on('data', (b: Buffer) => (logs += b.toString()));
        try {
          await until('the first sync', async () => (await save()).includes('10.244.2.4:8080'), 60_000);
          t.true((await save()).includes('default/linkding:http cluster IP'));
          const file = join(dir, 'shepherd.json');
          const manifest = JSON.parse(await readFile(file, 'utf8')) as { status: { endpoints: string[] } };
          manifest.status.endpoints = manifest.status.endpoints.filter((e) => e !== '10.244.2.4:8080');
          const edited = Date.now();
          await writeFile(file, JSON.stringify(manifest));
          await until('the edit to reach the kernel', async () => !(await save()).includes('10.244.2.4:8080'), 30_000);
          t.log(`edit reached the kernel after ${Date.now() - edited} ms`);
          // The log line comes after the kernel write (and the conntrack cleanup): wait for it too.
          await until('the partial sync log line', async () => logs.includes('"msg":"partial sync done"'), 30_000);
          t.regex(logs, /"changed":\["default\/web-service:http"\]/);
          t.regex(logs, /allocated ClusterIP 10\.\d+\.\d+\.\d+ to default\/web-service/);
        } finally {
          child.kill('SIGTERM');
          await new Promise((r) => child.once('exit', r));
        }
        t.true((await save()).includes('default/linkding:http cluster IP'), 'rules stay in place after drover exits');
        const cleanup = await drover(['cleanup', '--netns', netns, '--iptables-backend', 'nft']);
        t.is(cleanup.code, 0, cleanup.stderr);
        t.false(/KUBE-/.test(await save()));
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(`${dir}.status.json`, { force: true });
      await rm(`${dir}.state`, { recursive: true, force: true });
    }
  });

  /** The count of full syncs in a scrape of /metrics. */
  const fullSyncs = (metrics: string) => Number(/^kubeproxy_sync_full_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} (\d+)$/m.exec(metrics)?.[1]);
  /** The count of partial syncs in a scrape of /metrics. */
  const partialSyncs = (metrics: string) => Number(/^kubeproxy_sync_partial_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} (\d+)$/m.exec(metrics)?.[1]);

  /**
   * `drover run` started inside a fresh namespace (not with --netns, so that
   * its servers listen on the namespace's loopback and netlink answers for
   * it) on a copy of examples/, with `args`; `fn` gets the namespace and
   * helpers (`dir` is that copy); drover is stopped with SIGTERM at the end and the rules must stay.
   */
  async function withRunInNetns(
    t: import('ava').ExecutionContext,
    args: string[],
    fn: (w: { netns: string; dir: string; child: ReturnType<typeof spawn>; logs: () => string; save: () => Promise<string>; get: (url: string) => Promise<string> }) => Promise<void>,
  ): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), 'drover-cli-'));
    await cp(join(ROOT, 'examples'), dir, { recursive: true });
    try {
      await withNetns(async (netns) => {
        await run('ip', ['link', 'set', 'lo', 'up'], { netns });
        const save = async () => (await run('iptables-nft-save', ['-t', 'nat'], { netns })).stdout;
        const get = async (url: string) => (await run('curl', ['-s', '-o', '-', '-w', '\n%{http_code}', url], { netns, allowFail: true })).stdout;
        const child = spawn('ip', ['netns', 'exec', netns, process.execPath, DROVER, 'run', '--source', dir, '--iptables-backend', 'nft', '--status-file', `${dir}.status.json`, ...args], {
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let logs = '';
        child.stderr!.on('data', (b: Buffer) => (logs += b.toString()));
        try {
          // The metrics count a sync after its kernel write: wait for the count, not for the rules.
          await until('the first sync', async () => fullSyncs(await get('http://127.0.0.1:10249/metrics')) >= 1, 60_000);
          t.true((await save()).includes('10.244.2.4:8080'));
          t.true((await get('http://127.0.0.1:10256/healthz')).endsWith('\n200'));
          await fn({ netns, dir, child, logs: () => logs, save, get });
        } finally {
          child.kill('SIGTERM');
          await new Promise((r) => child.once('exit', r));
        }
        t.true((await save()).includes('default/linkding:http cluster IP'), 'rules stay in place after drover exits');
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(`${dir}.status.json`, { force: true });
    }
  }

  /** The KUBE-SVC chain of default/linkding:http in a nat dump. */
  const linkdingChain = (nat: string) => {
    const svc = /^-A KUBE-SERVICES .*default\/linkding:http cluster IP.* -j (KUBE-SVC-\w{16})$/m.exec(nat)?.[1];
    if (!svc) throw new Error('no KUBE-SVC chain for default/linkding:http');
    return svc;
  };

  test.serial('run serves metrics and health inside its namespace; SIGHUP repairs a hand-flushed chain at once', async (t) => {
    await withRunInNetns(t, ['--sync-period', '1h'], async ({ netns, child, logs, save, get }) => {
      const metrics = await get('http://127.0.0.1:10249/metrics');
      t.true(metrics.endsWith('\n200'));
      t.is(fullSyncs(metrics), 1);
      const nat = Number(/^kubeproxy_sync_proxy_rules_iptables_total\{ip_family="IPv4",table="nat"\} (\d+)$/m.exec(metrics)?.[1]);
      t.is(nat, (await save()).split('\n').filter((l) => l.startsWith('-A ')).length, "every nat rule in the namespace is drover's");
      t.regex(await get('http://127.0.0.1:10256/livez'), /^\{"lastUpdated": "[^"]+","currentTime": "[^"]+"\}\n200$/);
      // kube-proxy's defaults: metrics on loopback, the health server on every address (here, the namespace's).
      const listening = (await run('ss', ['-Hltn'], { netns })).stdout;
      t.regex(listening, /\s127\.0\.0\.1:10249\s/);
      t.regex(listening, /\s0\.0\.0\.0:10256\s/);
      t.is(await get('http://127.0.0.1:10249/healthz'), 'ok\n200', "the metrics server's /healthz, as kube-proxy's");
      const [configz] = (await get('http://127.0.0.1:10249/configz')).split('\n');
      t.like(JSON.parse(configz!)['kubeproxy.config.k8s.io'], { mode: 'iptables', syncPeriod: '1h0m0s', minSyncPeriod: '1s', metricsBindAddress: '127.0.0.1:10249', healthzBindAddress: '0.0.0.0:10256' });
      t.regex(logs(), /^\{"level":"info","time":"[^"]+","app":"drover",.*"msg":"drover started"\}$/m, 'JSON log lines name their level');

      const svc = linkdingChain(await save());
      await run('iptables-nft', ['-t', 'nat', '-F', svc], { netns });
      t.false((await save()).includes(`-A ${svc} `));
      child.kill('SIGHUP');
      await until('the resync to repair the chain', async () => (await save()).includes(`-A ${svc} `), 30_000);
      t.regex(logs(), /"msg":"full resync requested"/);
      await until('the second full sync to be counted', async () => fullSyncs(await get('http://127.0.0.1:10249/metrics')) === 2, 30_000);
    });
  });

  test.serial("run serves a LoadBalancer Service's health-check NodePort on --nodeport-addresses: 200, then 503, then gone with the Service; /proxyMode", async (t) => {
    await withRunInNetns(t, ['--hostname-override', 'node-a', '--nodeport-addresses', '127.0.0.0/8', '--min-sync-period', '100ms'], async ({ dir, get, logs }) => {
      t.is(await get('http://127.0.0.1:10249/proxyMode'), 'iptables\n200');
      const file = join(dir, 'lb.yaml');
      const manifests = (endpoints: object[]) =>
        [
          { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a' } },
          {
            apiVersion: 'v1',
            kind: 'Service',
            metadata: { name: 'web', namespace: 'shop' },
            spec: { type: 'LoadBalancer', clusterIP: '10.96.50.5', externalTrafficPolicy: 'Local', healthCheckNodePort: 32001, ports: [{ name: 'http', port: 80, nodePort: 30080 }] },
          },
          {
            apiVersion: 'discovery.k8s.io/v1',
            kind: 'EndpointSlice',
            metadata: { name: 'web-1', namespace: 'shop', labels: { 'kubernetes.io/service-name': 'web' } },
            addressType: 'IPv4',
            endpoints,
            ports: [{ name: 'http', port: 8080 }],
          },
        ]
          .map((o) => JSON.stringify(o))
          .join('\n---\n');
      const body = (n: number, status: number) => `{\n\t"service": {\n\t\t"namespace": "shop",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": ${n},\n\t"serviceProxyHealthy": true\n}\n${status}`;
      await writeFile(file, manifests([{ addresses: ['10.244.9.1'], nodeName: 'node-a' }, { addresses: ['10.244.9.2'], nodeName: 'node-b' }]));
      await until('the health check to answer 200', async () => (await get('http://127.0.0.1:32001/healthz')) === body(1, 200), 30_000);
      t.regex(logs(), /"msg":"serving the health check of Service shop\/web on port 32001"/);
      t.regex(logs(), /"address":"127\.0\.0\.1"/);

      await writeFile(file, manifests([{ addresses: ['10.244.9.2'], nodeName: 'node-b' }]));
      await until('the health check to answer 503', async () => (await get('http://127.0.0.1:32001/')) === body(0, 503), 30_000);

      await rm(file);
      await until('the health check to close', async () => (await get('http://127.0.0.1:32001/')).endsWith('\n000'), 30_000);
    });
  });

  test.serial('between full read-backs, the periodic check costs no iptables-save; a foreign commit or a lost canary brings a full sync that repairs', async (t) => {
    await withRunInNetns(t, ['--sync-period', '1s', '--min-sync-period', '100ms'], async ({ netns, logs, save, get }) => {
      // Three sync periods, each with its check, however long the machine takes for them.
      await until('three periodic partial syncs', async () => partialSyncs(await get('http://127.0.0.1:10249/metrics')) >= 3, 60_000);
      t.is(fullSyncs(await get('http://127.0.0.1:10249/metrics')), 1, 'three clean checks, no full sync');

      // A hand edit is an nf_tables commit that is not drover's.
      const svc = linkdingChain(await save());
      await run('iptables-nft', ['-t', 'nat', '-F', svc], { netns });
      await until('the periodic check to repair the chain', async () => (await save()).includes(`-A ${svc} `), 30_000);
      t.regex(logs(), /"reason":"nf_tables generation \d+, not \d+ as drover left it: another program committed rules"/);
      // The rules are in the kernel a moment before the sync that wrote them is counted.
      await until('the repairing full sync to be counted', async () => fullSyncs(await get('http://127.0.0.1:10249/metrics')) >= 2, 30_000);
      t.is(fullSyncs(await get('http://127.0.0.1:10249/metrics')), 2);

      // A table flushed by a firewall reload loses its canary.
      await run('iptables-nft', ['-t', 'mangle', '-X', 'KUBE-PROXY-CANARY'], { netns });
      await until('the canary to come back', async () => (await run('iptables-nft', ['-t', 'mangle', '-S', 'KUBE-PROXY-CANARY'], { netns, allowFail: true })).code === 0, 30_000);
      t.regex(logs(), /"reason":"the KUBE-PROXY-CANARY chain is gone from mangle"/);
    });
  });

  test.serial('cleanup names each chain a foreign rule keeps alive and that rule, keeps it empty, exits 3, and does not warn about --cluster-cidr', async (t) => {
    await withNetns(async (netns) => {
      const save = async (table: string) => (await run('iptables-nft-save', ['-t', table], { netns })).stdout;
      const state = await mkdtemp(join(tmpdir(), 'drover-cli-state-'));
      t.teardown(() => rm(state, { recursive: true, force: true }));
      const sync = await drover(['sync', '--once', '--source', join(ROOT, 'examples'), '--state-dir', state, '--netns', netns, '--iptables-backend', 'nft']);
      t.is(sync.code, 0, sync.stderr);
      t.regex(sync.stderr, /neither --cluster-cidr nor --masquerade-all is set/, 'a sync without --cluster-cidr warns');
      const sep = /^-A (KUBE-SEP-\w{16}) .*--to-destination 10\.244\.1\.2:9090$/m.exec(await save('nat'))?.[1];
      if (!sep) throw new Error('no KUBE-SEP chain for 10.244.1.2:9090');
      // An operator's rules, not drover's: one jumps to a static chain, one to an endpoint chain.
      await run('iptables-nft', ['-t', 'nat', '-A', 'PREROUTING', '-j', 'KUBE-MARK-MASQ'], { netns });
      await run('iptables-nft', ['-t', 'nat', '-N', 'OPERATOR'], { netns });
      await run('iptables-nft', ['-t', 'nat', '-A', 'OPERATOR', '-p', 'tcp', '-j', sep], { netns });

      const cleanup = await drover(['cleanup', '--netns', netns, '--iptables-backend', 'nft']);
      t.is(cleanup.code, 3, cleanup.stderr);
      t.is(cleanup.stdout, 'removed 21 chains and 15 hook rules\n');
      t.deepEqual(
        cleanup.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('{')),
        [
          'drover: nat chain KUBE-MARK-MASQ was emptied but not deleted: a rule drover does not own still jumps to it: -t nat -A PREROUTING -j KUBE-MARK-MASQ',
          `drover: nat chain ${sep} was emptied but not deleted: a rule drover does not own still jumps to it: -t nat -A OPERATOR -p tcp -j ${sep}`,
        ],
      );
      t.false(cleanup.stderr.includes('cluster-cidr'), cleanup.stderr);
      // The kernel: exactly the two chains, empty, and the operator's rules, untouched.
      t.deepEqual(
        (await save('nat')).split('\n').filter((l) => /KUBE-|OPERATOR/.test(l)),
        [':KUBE-MARK-MASQ - [0:0]', `:${sep} - [0:0]`, ':OPERATOR - [0:0]', '-A PREROUTING -j KUBE-MARK-MASQ', `-A OPERATOR -p tcp -j ${sep}`],
      );
      t.false((await save('filter')).includes('KUBE-'));
    });
  });
}
