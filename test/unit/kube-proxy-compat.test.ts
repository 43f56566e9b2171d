/**
 * drover started as kube-proxy is: kube-proxy's flags, a full kube-proxy
 * configuration file (every field), the source it implies, and the settings
 * read from the Node (detectLocalMode NodeCIDR, nodePortAddresses primary)
 * in the rules rendered.
 */
import test from 'ava';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareCommandLine } from '../../src/cli/command-line.ts';
import { settingName } from '../../src/cli/config-file.ts';
import { FIELDS } from '../../src/cli/kube-proxy-fields.ts';
import { KUBE_PROXY_FLAGS } from '../../src/cli/kube-proxy-flags.ts';
import { buildProgram } from '../../src/cli/program.ts';
import { drover } from '../support/faults.ts';

const FULL = new URL('../fixtures/config/kube-proxy-full.yaml', import.meta.url).pathname;

/** The command line drover makes of `argv` (the arguments after `drover`), the options its command gets, the warnings, and the command. */
async function started(argv: string[]): Promise<{ args: string[]; opts: Record<string, unknown>; warnings: string[]; name: (flag: string) => string }> {
  const program = buildProgram();
  const warnings: string[] = [];
  const args = prepareCommandLine(program, ['node', 'drover', ...argv], (l) => warnings.push(l.replaceAll(FULL, 'F')));
  const cmd = program.commands.find((c) => c.name() === args[2])!;
  let opts: Record<string, unknown> = {};
  cmd.action(async (o: Record<string, unknown>) => void (opts = o));
  await program.parseAsync(args);
  return { args: args.slice(2), opts, warnings, name: (flag) => settingName(cmd, flag).replaceAll(FULL, 'F') };
}

/** The error `argv` ends in, with the file's path as F. */
async function refusal(argv: string[]): Promise<string> {
  try {
    await started(argv);
  } catch (err) {
    return (err as Error).message.replaceAll(FULL, 'F');
  }
  return 'accepted';
}

/** The field names a "not supported by drover" line lists. */
function namedIn(line: string): string[] {
  const body = line.replace(/^drover: /, '').replace(/^not supported by drover: --config F: /, '').replace(/; (going on without them|to start without them).*$/, '');
  return body.split(/; (?=[a-zA-Z.]+(?:=| \())/).map((part) => part.replace(/[= (].*$/, ''));
}

for (const mode of ['iptables', 'ipvs', 'nftables'] as const) {
  test(`a full kube-proxy configuration, mode ${mode}: each field is used, or without effect as in kube-proxy, or refused in one line naming it`, async (t) => {
    const { args, opts, warnings, name } = await started(['--config', FULL, '--proxy-mode', mode, '--config-unsupported=warn']);
    t.deepEqual(args.slice(0, 1), ['run'], 'no command: drover run');
    t.is(opts.source, 'kubernetes', 'with a kube-proxy configuration the source is the Kubernetes API');
    t.is(warnings.length, 1);
    const refused = namedIn(warnings[0]!);
    const run = buildProgram().commands.find((c) => c.name() === 'run')!;
    const used: string[] = [];
    for (const [field, { rule }] of Object.entries(FIELDS)) {
      const applies = rule.use === 'ignored' ? false : rule.modes === undefined || rule.modes.includes(mode);
      if (rule.use === 'flag' && applies && run.options.some((o) => o.long === rule.flag)) {
        if (name(rule.flag) === `--config F: ${field}`) used.push(field);
        else if (field !== 'mode') t.fail(`${field} should set ${rule.flag}, which says ${name(rule.flag)}`);
      }
    }
    for (const field of refused) t.true(Object.hasOwn(FIELDS, field), `${field} is a field`);
    for (const [field, { rule }] of Object.entries(FIELDS)) {
      const applies = rule.use === 'ignored' ? false : rule.modes === undefined || rule.modes.includes(mode);
      const hasFlag = rule.use === 'flag' && run.options.some((o) => o.long === rule.flag);
      const flagMissing = rule.use === 'flag' && !hasFlag && rule.withoutFlag?.('json') !== true;
      const expectRefused = applies && (rule.use === 'refused' || flagMissing);
      t.is(refused.includes(field), expectRefused, `${field}: ${expectRefused ? 'refused' : 'not refused'} in mode ${mode}`);
      if (!expectRefused && hasFlag && applies && field !== 'mode') t.true(used.includes(field), `${field} is used`);
    }
    const periods = { iptables: [60_000, 2000], ipvs: [90_000, 3000], nftables: [120_000, 4000] }[mode];
    t.like(opts, {
      mode,
      kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf',
      hostnameOverride: 'node-a',
      bindAddress: ['192.0.2.10'],
      verbosity: 4,
      masqueradeAll: true,
      nodeportLocalhost: mode === 'iptables',
      syncPeriod: periods[0],
      minSyncPeriod: periods[1],
      ipvsScheduler: 'wrr',
      detectLocalMode: 'NodeCIDR',
      clusterCidr: '10.244.0.0/16',
      metricsBindAddress: { port: 10249 },
      healthzBindAddress: { port: 10256 },
    });
    t.true((opts.nodeportAddresses as { primary?: true }).primary, 'nodePortAddresses: [primary]');
  });
}

test('without --config-unsupported=warn, the full file stops drover with one line naming each refused field', async (t) => {
  const message = await refusal(['--config', FULL]);
  t.regex(message, /^not supported by drover: --config F: featureGates=\{"SomeGate":true\} \(drover has no feature gates; [^)]*\); /);
  t.regex(message, /; iptables\.masqueradeBit=13 \(drover marks packets to masquerade with bit 14 \(0x4000\) in every mode, kube-proxy's default\); /);
  t.regex(message, /; to start without them, add --config-unsupported=warn$/);
  t.false(message.includes('\n'));
});

test("kube-proxy's flags: aliases of drover's, mode-specific sync periods, -v, switches as pflag writes them", async (t) => {
  const ipvs = await started(['--proxy-mode', 'ipvs', '--iptables-sync-period', '1m', '--ipvs-sync-period=2m', '--ipvs-min-sync-period', '5s', '-v', '4', '--masquerade-all=true', '--source', 'examples']);
  t.like(ipvs.opts, { mode: 'ipvs', syncPeriod: 120_000, minSyncPeriod: 5000, verbosity: 4, masqueradeAll: true });
  const iptables = await started(['run', '--iptables-sync-period', '1m0s', '--iptables-min-sync-period=1.5s', '--v=3', '--source', 'examples', '--iptables-localhost-nodeports=false']);
  t.like(iptables.opts, { mode: 'iptables', syncPeriod: 60_000, minSyncPeriod: 1500, verbosity: 3, nodeportLocalhost: false });
  t.like((await started(['run', '-v7', '--source', 'examples', '--iptables-localhost-nodeports'])).opts, { verbosity: 7, nodeportLocalhost: true });
  t.like((await started(['run', '--sync-period', '1m0s', '--source', 'examples'])).opts, { syncPeriod: 60_000 }, "drover's own flag takes Go durations");
  const quiet = await started(['run', '--kube-api-qps', '5', '--config-sync-period=15m', '--iptables-masquerade-bit', '14', '--log-flush-frequency', '5s', '--source', 'examples']);
  t.deepEqual(quiet.warnings, []);
  t.deepEqual(quiet.args, ['run', '--source', 'examples'], 'flags with no effect on drover are dropped');
});

test("a switch the configuration file turns on is turned off by kube-proxy's --name=false or drover's --no-name", async (t) => {
  const on = await started(['--config', FULL, '--proxy-mode', 'iptables', '--config-unsupported=warn']);
  t.like(on.opts, { masqueradeAll: true, nodeportLocalhost: true, conntrackTcpBeLiberal: true });
  const kubeProxy = await started(['--config', FULL, '--proxy-mode', 'iptables', '--config-unsupported=warn', '--masquerade-all=false', '--iptables-localhost-nodeports=false', '--conntrack-tcp-be-liberal=false']);
  t.like(kubeProxy.opts, { masqueradeAll: false, nodeportLocalhost: false, conntrackTcpBeLiberal: false });
  t.is(kubeProxy.name('--masquerade-all'), '--masquerade-all', 'the value in effect is the command line\'s');
  const own = await started(['--config', FULL, '--proxy-mode', 'iptables', '--config-unsupported=warn', '--no-masquerade-all', '--no-nodeport-localhost', '--no-conntrack-tcp-be-liberal']);
  t.like(own.opts, { masqueradeAll: false, nodeportLocalhost: false, conntrackTcpBeLiberal: false });
  t.like((await started(['run', '--source', 'examples', '--masquerade-all=false'])).opts, { masqueradeAll: false });
  t.like((await started(['run', '--source', 'examples', '--no-masquerade-all=false'])).opts, { masqueradeAll: true });
  t.like((await started(['--config', FULL, '--proxy-mode', 'iptables', '--config-unsupported=warn', '--no-masquerade-all=true'])).opts, { masqueradeAll: false });
});

test("kube-proxy's flags drover cannot honour are refused in one line, or warned about with --config-unsupported=warn", async (t) => {
  t.is(
    await refusal(['run', '--source', 'examples', '--ipvs-strict-arp', '--oom-score-adj', '-999', '--iptables-masquerade-bit=13']),
    'not supported by drover: --ipvs-strict-arp (drover does not set arp_ignore and arp_announce; set them on the node); ' +
      "--oom-score-adj=-999 (drover does not set its OOM score; set it where drover is started (systemd's OOMScoreAdjust=, the pod's priority class)); " +
      "--iptables-masquerade-bit=13 (drover marks packets to masquerade with bit 14 (0x4000) in every mode, kube-proxy's default); to start without them, add --config-unsupported=warn",
  );
  const warned = await started(['run', '--source', 'examples', '--pod-bridge-interface', 'cbr0', '--config-unsupported', 'warn']);
  t.deepEqual(warned.warnings, [
    'drover: not supported by drover: --pod-bridge-interface=cbr0 (drover tells local traffic by its source address only (--detect-local-mode ClusterCIDR or NodeCIDR)); going on without them (--config-unsupported=warn)',
  ]);
  t.is(await refusal(['run', '--source', 'examples', '--proxy-mode']), "kube-proxy's flag --proxy-mode needs a value");
});

test('--cleanup is drover cleanup in the mode in use; --kubeconfig or --master without --source is the Kubernetes API', async (t) => {
  t.deepEqual((await started(['--cleanup', '--proxy-mode', 'nftables', '--netns', 'ns1', '--cluster-cidr', '10.0.0.0/8', '-v', '2'])).args, ['cleanup', '--netns', 'ns1', '--verbosity', '2', '--mode', 'nftables']);
  t.deepEqual((await started(['--config', FULL, '--cleanup', '--config-unsupported=warn'])).args, ['cleanup', '--mode', 'iptables']);
  t.is((await started(['render', '--kubeconfig', '/k'])).opts.source, 'kubernetes');
  t.like((await started(['render', '--master', '10.0.0.1:6443'])).opts, { source: 'kubernetes', master: 'https://10.0.0.1:6443' });
  t.is((await started(['render', '--master', 'https://api:6443', '--source', 'examples'])).opts.source, 'examples');
});

test("docs/kube-proxy.md lists every kube-proxy flag and configuration field drover knows", async (t) => {
  const doc = await readFile(new URL('../../docs/kube-proxy.md', import.meta.url), 'utf8');
  for (const flag of Object.keys(KUBE_PROXY_FLAGS)) t.true(doc.includes(flag === 'v' ? '`-v`' : `\`--${flag}\``), `--${flag}`);
  for (const field of Object.keys(FIELDS)) t.true(doc.includes(`\`${field}\``), field);
});

/** A local IPv4 address of this host that is not loopback: what render reads NodePort addresses from. */
function hostIPv4(): string | undefined {
  return Object.values(networkInterfaces())
    .flat()
    .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal)?.address;
}

/** A folder with a NodePort Service, its endpoints, and Node node-a with `podCIDRs` and InternalIP `ip`. */
async function manifests(ip: string, podCIDRs: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-kp-'));
  await writeFile(
    join(dir, 'all.yaml'),
    `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 80, protocol: TCP, targetPort: 8080, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.244.1.5], conditions: {ready: true}, nodeName: node-a}]
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
spec: {podCIDRs: ${podCIDRs}}
status: {addresses: [{type: Hostname, address: node-a}, {type: ExternalIP, address: 203.0.113.9}, {type: InternalIP, address: ${ip}}]}
`,
  );
  return dir;
}

test('detectLocalMode NodeCIDR: the rules tell local traffic by the Node spec.podCIDRs, in iptables and nftables mode; no podCIDRs is one line', async (t) => {
  const dir = await manifests('192.0.2.77', '[10.244.1.0/24]');
  try {
    const base = ['render', '--source', dir, '--hostname-override', 'node-a', '--cluster-cidr', '10.244.0.0/16'];
    const cluster = await drover(base);
    t.is(cluster.code, 0, cluster.stderr);
    t.true(cluster.stdout.includes('-A KUBE-SVC-'), cluster.stdout);
    t.regex(cluster.stdout, /! -s 10\.244\.0\.0\/16 -d 10\.96\.0\.10\/32 .*-j KUBE-MARK-MASQ/);
    const node = await drover([...base, '--detect-local-mode', 'NodeCIDR']);
    t.is(node.code, 0, node.stderr);
    t.regex(node.stdout, /! -s 10\.244\.1\.0\/24 -d 10\.96\.0\.10\/32 .*-j KUBE-MARK-MASQ/);
    t.false(node.stdout.includes('10.244.0.0/16'));
    const nft = await drover([...base, '--mode', 'nftables', '--detect-local-mode', 'NodeCIDR']);
    t.is(nft.code, 0, nft.stderr);
    t.regex(nft.stdout, /ip saddr != 10\.244\.1\.0\/24 /);
    t.false(nft.stdout.includes('10.244.0.0/16'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const none = await manifests('192.0.2.77', '[]');
  try {
    const r = await drover(['render', '--source', none, '--hostname-override', 'node-a', '--detect-local-mode', 'NodeCIDR']);
    t.is(r.code, 1);
    t.is(r.stderr, 'drover: --detect-local-mode NodeCIDR: Node node-a has no spec.podCIDRs\n');
  } finally {
    await rm(none, { recursive: true, force: true });
  }
});

test("nodePortAddresses primary: NodePorts answer on the Node's first InternalIP only", async (t) => {
  const ip = hostIPv4();
  if (ip === undefined) return t.fail('this host has no IPv4 address but loopback');
  const dir = await manifests(ip, '[10.244.1.0/24]');
  try {
    const base = ['render', '--source', dir, '--hostname-override', 'node-a'];
    const every = await drover(base);
    t.is(every.code, 0, every.stderr);
    t.regex(every.stdout, /-I PREROUTING 1 ! -d 127\.0\.0\.0\/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS/);
    const primary = await drover([...base, '--nodeport-addresses', 'primary']);
    t.is(primary.code, 0, primary.stderr);
    for (const hook of ['PREROUTING', 'OUTPUT']) t.true(primary.stdout.includes(`-I ${hook} 1 -d ${ip}/32 -m comment --comment "kubernetes service nodeports" -j KUBE-NODEPORTS`), primary.stdout);
    t.false(primary.stdout.includes('--dst-type LOCAL -j KUBE-NODEPORTS'));
    t.false(primary.stdout.includes('203.0.113.9'), 'an ExternalIP is primary only when the Node has no InternalIP');
    const nft = await drover([...base, '--mode', 'nftables', '--nodeport-addresses', 'primary']);
    t.is(nft.code, 0, nft.stderr);
    t.true(nft.stdout.includes(`${ip} . tcp . 30080`), nft.stdout);
    const bound = await drover([...base, '--nodeport-addresses', 'primary', '--bind-address', '198.51.100.1']);
    t.is(bound.code, 0, bound.stderr);
    t.false(bound.stdout.includes(`-d ${ip}/32`), '--bind-address overrides the Node: no local address is the primary one');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('drover run stops when the Node settings it started with change, and syncs nothing with them', async (t) => {
  const { guardNodeSettings, nodeSettings } = await import('../../src/cli/node-settings.ts');
  const node = (podCIDRs: string[]) => ({ name: 'node-a', addresses: [{ type: 'InternalIP' as const, address: '192.0.2.7' }], podCIDRs });
  const reads = [node(['10.244.1.0/24']), node(['10.244.1.0/24']), node(['10.244.9.0/24'])];
  const source = {
    load: async () => ({ snapshot: { services: new Map(), node: reads.shift()! }, errors: [], warnings: [], incomplete: [], changed: undefined }),
    watch: () => {},
    close: () => {},
  };
  const opts = { detectLocalMode: 'NodeCIDR' as const, nodeportAddresses: Object.assign([], { primary: true as const }) };
  const settings = nodeSettings(opts, (await source.load()).snapshot.node);
  t.is(settings.clusterCidr, '10.244.1.0/24');
  t.deepEqual(settings.nodeportAddresses?.map((c) => c.text), ['192.0.2.7/32']);
  const told: string[] = [];
  const guarded = guardNodeSettings(source, opts, settings, (why) => told.push(why));
  await guarded.load();
  await t.throwsAsync(guarded.load(), { message: /^Node node-a: its spec\.podCIDRs changed from 10\.244\.1\.0\/24 to 10\.244\.9\.0\/24; drover stops/ });
  t.is(told.length, 1);
});
