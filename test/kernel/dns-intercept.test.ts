/**
 * `drover run --dns-intercept-cluster-dns` in the node namespace of a
 * testbed, in iptables and in nftables mode: `dig` from a client namespace
 * to the kube-dns ClusterIP is answered by drover, over UDP and TCP, although
 * the mode DNATs that ClusterIP's port 53 to a Pod that only echoes UDP
 * datagrams; another port of the ClusterIP still reaches the Pod. A restart
 * without the flag (iptables), or without --dns-address (nftables), removes
 * the address and the rules, and the ClusterIP's port 53 is DNATed to the
 * Pod again. IPVS mode refuses the flag (checked before anything is
 * written); its kernel path is not tested here (no IPVS on the host).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { run } from '../../src/kernel/exec.ts';
import { NFT } from '../../src/modes/nftables/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { probe, udpOnce } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { DROVER, drover as droverOnce, startDrover, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';

const unavailable = (await testbedUnavailableReason()) ?? (await import('node:child_process')).spawnSync('dig', ['-v']).error?.message;
const DNS = '169.254.20.10';
const CLUSTER_DNS = '10.96.0.10';

/** kube-system/kube-dns at 10.96.0.10 (53/UDP and 53/TCP to the Pod's 5300, 9153/TCP to its 8080) and default/web at 10.96.0.50. */
function manifests(): string {
  const svc = (namespace: string, name: string, clusterIP: string, ports: Array<{ name: string; port: number; targetPort: number; protocol: string }>) => [
    { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace }, spec: { clusterIP, ports } },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${name}-1`, namespace, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.244.1.2'], conditions: { ready: true } }],
      ports: ports.map((p) => ({ name: p.name, port: p.targetPort, protocol: p.protocol })),
    },
  ];
  return [
    ...svc('kube-system', 'kube-dns', CLUSTER_DNS, [
      { name: 'dns', port: 53, targetPort: 5300, protocol: 'UDP' },
      { name: 'dns-tcp', port: 53, targetPort: 5300, protocol: 'TCP' },
      { name: 'metrics', port: 9153, targetPort: 8080, protocol: 'TCP' },
    ]),
    ...svc('default', 'web', '10.96.0.50', [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }]),
  ]
    .map((o) => JSON.stringify(o))
    .join('\n---\n');
}

if (unavailable) {
  test.skip(`DNS interception tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('the kube-dns ClusterIP is answered by drover in iptables and nftables mode, and no longer once the flag is off', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-dns-intercept-'));
    const source = join(dir, 'manifests');
    let topo: Topology | undefined;
    let drover: RunningDrover | undefined;
    t.teardown(async () => {
      await drover?.kill();
      await topo?.destroy();
      await rm(dir, { recursive: true, force: true });
    });
    topo = await createTopology({ backends: [{ name: 'dns-1', ip: '10.244.1.2', ports: [8080], udpPorts: [5300] }] });
    const { node } = topo;
    const client = topo.client().netns;
    await mkdir(source);
    await writeFile(join(source, 'services.json'), manifests());
    const start = (extra: string[]) =>
      startDrover(['--source', source, '--cluster-cidr', '10.244.0.0/16', '--dns-upstream', '127.0.0.1:9', '--status-file', join(dir, 'status.json'), '--state-dir', join(dir, 'state'), '--metrics-bind-address', '', '--healthz-bind-address', '', ...extra], { netns: node });
    // One try, answered within 5 s: drover's event loop may be busy for a moment (the collection after a sync) on a loaded machine.
    const dig = async (server: string, ...args: string[]) => (await topo!.exec(client, 'dig', [`@${server}`, '+time=5', '+tries=1', ...args], { allowFail: true })).stdout;
    const short = async (server: string, ...args: string[]) => (await dig(server, '+short', ...args)).trim().split('\n').filter((l) => l !== '');
    const sh = async (cmd: string, ...args: string[]) => {
      const res = await topo!.exec(node, cmd, args, { allowFail: true });
      return res.stdout + res.stderr;
    };
    // drover-cdns0, or lo with the label lo:drover-cdns on a kernel without the dummy driver.
    const cdnsLink = async () => (await sh('ip', '-o', '-4', 'addr', 'show')).split('\n').filter((l) => /drover-cdns/.test(l)).join('\n');
    let sourcePort = 40_000;
    const echoAt53 = () => udpOnce(topo!, { from: client, host: CLUSTER_DNS, port: 53, sourcePort: sourcePort++, timeoutMs: 2000 });

    /** With the flag on: drover answers at the ClusterIP, over UDP and TCP, exactly; the ClusterIP's other port still reaches the Pod. */
    const intercepted = async (mode: string) => {
      await until(`${mode}: drover answers at ${CLUSTER_DNS}`, async () => (await short(CLUSTER_DNS, 'web.default.svc.cluster.local')).includes('10.96.0.50') || !drover!.alive, 30_000, 200);
      t.true(drover!.alive, drover!.logs());
      const answer = await dig(CLUSTER_DNS, 'web.default.svc.cluster.local', 'A', '+noall', '+answer', '+comments');
      t.regex(answer, /flags: qr aa rd ra;/, mode);
      t.regex(answer, /^web\.default\.svc\.cluster\.local\.\s+5\s+IN\s+A\s+10\.96\.0\.50$/m, mode);
      t.deepEqual(await short(CLUSTER_DNS, '+tcp', '_http._tcp.web.default.svc.cluster.local', 'SRV'), ['0 100 80 web.default.svc.cluster.local.'], mode);
      t.deepEqual(await short(CLUSTER_DNS, '-x', CLUSTER_DNS), ['kube-dns.kube-system.svc.cluster.local.'], mode);
      t.deepEqual(await short(DNS, 'kube-dns.kube-system.svc.cluster.local'), [CLUSTER_DNS], `${mode}: the node-local address still answers`);
      t.regex(await cdnsLink(), new RegExp(`inet ${CLUSTER_DNS.replace(/\./g, '\\.')}/32 `), mode);
      const metrics = await probe(topo!, { host: CLUSTER_DNS, port: 9153, count: 2, timeoutMs: 3000 });
      t.deepEqual(metrics.counts, { 'dns-1': 2 }, `${mode}: ${JSON.stringify(metrics)}`);
      const tracked = await topo!.exec(node, 'conntrack', ['-L', '-d', CLUSTER_DNS, '-p', 'udp'], { allowFail: true });
      t.is(tracked.stdout.trim(), '', `${mode}: the ClusterIP's DNS left no conntrack entry`);
    };
    /** With the flag off: no address, no rule names the ClusterIP, and its port 53 reaches the Pod's echo again. */
    const released = async (mode: string, rules: () => Promise<string>) => {
      t.is(await cdnsLink(), '', mode);
      t.notRegex(await rules(), /10\.96\.0\.10/, mode);
      const echo = await echoAt53();
      t.true(echo.ok && echo.reply.backend === 'dns-1', `${mode}: ${JSON.stringify(echo)}`);
    };

    // iptables mode: the mode's DNAT for 10.96.0.10:53 is there, and bypassed.
    drover = start(['--dns-address', DNS, '--dns-intercept-cluster-dns']);
    await intercepted('iptables');
    t.regex(await sh('iptables-save', '-t', 'nat'), /^-A KUBE-SERVICES -d 10\.96\.0\.10\/32 -p udp .*--dport 53 .*-j KUBE-SVC-/m);
    t.regex(await sh('iptables-save', '-t', 'raw'), /^-A DROVER-DNS -d 10\.96\.0\.10\/32 -p udp -m udp --dport 53 -j NOTRACK$/m);
    await drover.stop();
    // A restart with --dns-address and without the flag.
    drover = start(['--dns-address', DNS]);
    await until('iptables: restarted without the flag', async () => (await short(DNS, 'web.default.svc.cluster.local')).includes('10.96.0.50') || !drover!.alive, 30_000, 200);
    t.true(drover.alive, drover.logs());
    await released('iptables, restarted without the flag', () => sh('iptables-save', '-t', 'raw'));
    t.regex(await sh('iptables-save', '-t', 'raw'), /^-A DROVER-DNS -d 169\.254\.20\.10\/32 -p udp -m udp --dport 53 -j NOTRACK$/m, 'the address keeps its rules');
    await drover.stop();
    const cleanup = await topo.exec(node, process.execPath, [DROVER, 'cleanup']);
    t.regex(cleanup.stdout, /^removed the node DNS dataplane: 2 chains, 4 hook rules, 0 nftables tables, [01] links$/m);

    // The echo above left a conntrack entry for the ClusterIP: not the next mode's.
    await topo.exec(node, 'conntrack', ['-D', '-d', CLUSTER_DNS], { allowFail: true });

    // nftables mode: drover's nat chains (priority -100) DNAT 10.96.0.10:53; drover-dns's notrack (priority raw, -300) comes first.
    drover = start(['--mode', 'nftables', '--dns-address', DNS, '--dns-intercept-cluster-dns']);
    await intercepted('nftables');
    t.regex(await sh(NFT, 'list', 'chain', 'ip', 'drover', 'nat-prerouting'), /type nat hook prerouting priority dstnat; policy accept;/);
    t.regex(await sh(NFT, 'list', 'table', 'ip', 'drover'), /10\.96\.0\.10 \. udp \. 53 \. 0 : 10\.244\.1\.2 \. 5300/);
    t.regex(await sh(NFT, 'list', 'chain', 'inet', 'drover-dns', 'raw-prerouting'), /priority raw; policy accept;\n(.*\n)*\s+ip daddr 10\.96\.0\.10 udp dport 53 notrack/);
    await drover.stop();
    // A restart without --dns-address removes what the intercepting run left.
    drover = start(['--mode', 'nftables']);
    await until('nftables: restarted without --dns-address', async () => drover!.lines(/sync done/).length > 0 || !drover!.alive, 30_000, 200);
    t.true(drover.alive, drover.logs());
    t.is(drover.lines(/cluster DNS interception and node DNS rules of an earlier run are removed/).length, 1, drover.logs());
    await released('nftables, restarted without --dns-address', () => sh(NFT, 'list', 'table', 'inet', 'drover-dns'));
    t.notRegex(await sh(NFT, 'list', 'tables'), /drover-dns/);
    await drover.stop();
  });

  test('--dns-intercept-cluster-dns is refused in IPVS mode, without --dns-address, and without kube-dns in the source, in one line, before the address or a rule is written', async (t) => {
    // In a namespace of its own, as drover run would be if it did not refuse.
    await withNetns(async (netns) => {
      const once = (args: string[]) => droverOnce(['run', '--source', '/nonexistent', ...args], { netns });
      const ipvs = await once(['--mode', 'ipvs', '--dns-address', DNS, '--dns-intercept-cluster-dns']);
      t.is(ipvs.code, 1);
      t.is(
        ipvs.stderr,
        "drover: --dns-intercept-cluster-dns does not work in IPVS mode: IPVS sends the ClusterIP's queries to the Pods whether conntrack tracks them or not; point the Pods at --dns-address instead (the kubelet's --cluster-dns)\n",
      );
      t.is((await once(['--dns-intercept-cluster-dns'])).stderr, 'drover: --dns-intercept-cluster-dns needs --dns-address: the queries are answered by the node DNS\n');
      t.is((await once(['--cluster-dns', CLUSTER_DNS])).stderr, `drover: --cluster-dns ${CLUSTER_DNS} is only used with --dns-intercept-cluster-dns\n`);
      // A source without kube-system/kube-dns: refused after the first read, before the DNS address or any rule is written.
      const dir = await mkdtemp(join(tmpdir(), 'drover-dns-intercept-'));
      try {
        await writeFile(join(dir, 'web.json'), JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'default' }, spec: { clusterIP: '10.96.0.50', ports: [{ port: 80 }] } }));
        const flags = ['--state-dir', join(dir, 'state'), '--status-file', join(dir, 'status.json'), '--metrics-bind-address', '', '--healthz-bind-address', '', '--dns-address', DNS, '--dns-intercept-cluster-dns'];
        const none = await droverOnce(['run', '--source', join(dir, 'web.json'), ...flags], { netns });
        t.is(none.code, 1);
        t.deepEqual(none.stderr.split('\n').filter((l) => l.startsWith('drover: ')), ['drover: --dns-intercept-cluster-dns: the source has no Service kube-system/kube-dns with an IPv4 ClusterIP; name the cluster DNS ClusterIP with --cluster-dns']);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      t.is((await run('ip', ['-o', 'link'], { netns })).stdout.split('\n').filter((l) => l !== '').length, 1, 'only lo');
      t.is((await run(NFT, ['list', 'tables'], { netns })).stdout.trim(), '', 'no table');
    });
  });
}
