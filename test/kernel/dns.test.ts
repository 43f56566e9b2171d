/**
 * The node's Service DNS end to end: `drover run --dns-address` inside the
 * node namespace of a testbed, on a folder of manifests; `dig` from a client
 * namespace asks for every record kind the sources give (A, SRV, PTR,
 * dns-version TXT, a headless Service's records, an ExternalName Service's
 * CNAME), NXDOMAIN and NODATA, over UDP and TCP, in any case; then
 * the path a program takes: the client's /etc/netns/NAME/resolv.conf with
 * the cluster search list, `getent hosts web`, and a real connection to
 * `web`, by name, that reaches the Service's backend. A Service file added
 * and one removed are answered after the sync that programmed them.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, rmdir, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { DROVER, drover as droverOnce, startDrover, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';

const unavailable = (await testbedUnavailableReason()) ?? (await import('node:child_process')).spawnSync('dig', ['-v']).error?.message;
const DNS = '169.254.20.10';

/** A Service with one EndpointSlice, as JSON manifests. */
function service(ns: string, name: string, clusterIP: string, ports: Array<{ name: string; port: number; targetPort: number; protocol?: string }>, endpoint: string): string {
  const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: ns }, spec: { clusterIP, ports: ports.map((p) => ({ protocol: 'TCP', ...p })) } };
  const slice = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${name}-1`, namespace: ns, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [endpoint], conditions: { ready: true } }],
    ports: ports.map((p) => ({ name: p.name, port: p.targetPort, protocol: p.protocol ?? 'TCP' })),
  };
  return `${JSON.stringify(svc)}\n---\n${JSON.stringify(slice)}\n`;
}

/**
 * The headless Service default/peers (named port gossip, 7000/TCP): peer-0 at
 * 10.244.5.1 and 10.244.5.2 without a hostname ready, peer-2 at 10.244.5.3
 * not ready; and the ExternalName Service default/docs → docs.example.com.
 */
function dnsOnlyServices(): string {
  const peers = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'peers', namespace: 'default' }, spec: { clusterIP: 'None', ports: [{ name: 'gossip', port: 7000 }] } };
  const slice = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'peers-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'peers', 'service.kubernetes.io/headless': '' } },
    addressType: 'IPv4',
    endpoints: [
      { addresses: ['10.244.5.1'], hostname: 'peer-0', conditions: { ready: true } },
      { addresses: ['10.244.5.2'], conditions: { ready: true } },
      { addresses: ['10.244.5.3'], hostname: 'peer-2', conditions: { ready: false } },
    ],
    ports: [{ name: 'gossip', port: 7000, protocol: 'TCP' }],
  };
  const docs = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'docs', namespace: 'default' }, spec: { type: 'ExternalName', externalName: 'docs.example.com' } };
  return [peers, slice, docs].map((o) => JSON.stringify(o)).join('\n---\n');
}

if (unavailable) {
  test.skip(`DNS tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('dig, getent and a connection by name are answered from what drover syncs, and follow a change', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-dns-'));
    const source = join(dir, 'manifests');
    let topo: Topology | undefined;
    let drover: RunningDrover | undefined;
    let netnsEtc: string | undefined;
    // ip-netns(8)'s per-namespace /etc: made for the client, and removed with it (the folder too, when this test made it).
    const madeEtcNetns = !existsSync('/etc/netns');
    t.teardown(async () => {
      await drover?.kill();
      await topo?.destroy();
      if (netnsEtc !== undefined) await rm(netnsEtc, { recursive: true, force: true });
      if (madeEtcNetns) await rmdir('/etc/netns').catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    });
    topo = await createTopology({ backends: [{ name: 'web-1', ip: '10.244.1.2', ports: [8080] }] });
    const client = topo.client();
    await mkdir(source);
    await writeFile(join(source, 'web.json'), service('default', 'web', '10.96.0.50', [{ name: 'http', port: 80, targetPort: 8080 }, { name: 'dns', port: 53, targetPort: 53, protocol: 'UDP' }], '10.244.1.2'));
    await writeFile(join(source, 'db.json'), service('shop', 'db', '10.96.0.60', [{ name: '', port: 5432, targetPort: 5432 }], '10.244.1.2'));
    await writeFile(join(source, 'dns-only.json'), dnsOnlyServices());
    drover = startDrover(
      ['--source', source, '--cluster-cidr', '10.244.0.0/16', '--dns-address', DNS, '--dns-upstream', '127.0.0.1:9', '--dns-ttl', '7',
        '--status-file', join(dir, 'status.json'), '--state-dir', join(dir, 'state'), '--metrics-bind-address', '', '--healthz-bind-address', '', '--log-level', 'debug'],
      { netns: topo.node },
    );
    // One try, answered within 5 s: drover's event loop may be busy for a moment (the collection after a sync) on a loaded machine.
    const dig = async (args: string[]) => (await topo!.exec(client.netns, 'dig', [`@${DNS}`, '+time=5', '+tries=1', ...args], { allowFail: true })).stdout;
    const short = async (...args: string[]) => (await dig(['+short', ...args])).trim().split('\n').filter((l) => l !== '');
    const status = async (...args: string[]) => /status: (\w+)/.exec(await dig(args))?.[1];
    await until('drover answers web over DNS', async () => (await short('web.default.svc.cluster.local')).includes('10.96.0.50') || !drover!.alive, 60_000, 200);
    t.true(drover.alive, drover.logs());

    t.deepEqual(await short('web.default.svc.cluster.local', 'A'), ['10.96.0.50']);
    t.deepEqual(await short('WEB.Default.SVC.cluster.local.', 'A', '+tcp'), ['10.96.0.50']);
    t.deepEqual(await short('_http._tcp.web.default.svc.cluster.local', 'SRV'), ['0 100 80 web.default.svc.cluster.local.']);
    t.deepEqual(await short('_dns._udp.web.default.svc.cluster.local', 'SRV'), ['0 100 53 web.default.svc.cluster.local.']);
    t.deepEqual(await short('-x', '10.96.0.50'), ['web.default.svc.cluster.local.']);
    t.deepEqual(await short('db.shop.svc.cluster.local'), ['10.96.0.60']);
    t.deepEqual(await short('dns-version.cluster.local', 'TXT'), ['"1.1.0"']);
    const answer = await dig(['web.default.svc.cluster.local', 'A', '+noall', '+answer']);
    t.regex(answer, /^web\.default\.svc\.cluster\.local\.\s+7\s+IN\s+A\s+10\.96\.0\.50$/m);
    t.is(await status('nope.default.svc.cluster.local'), 'NXDOMAIN');
    const nodata = await dig(['web.default.svc.cluster.local', 'AAAA']);
    t.regex(nodata, /status: NOERROR/);
    t.regex(nodata, /ANSWER: 0, AUTHORITY: 1/);
    t.regex(nodata, /flags: qr aa rd ra/);
    t.is(await status('default.svc.cluster.local', 'A'), 'NOERROR');

    // The headless Service: its ready endpoints, their own names, SRV to them, PTR from them; the ExternalName Service: a CNAME.
    t.deepEqual(await short('peers.default.svc.cluster.local', 'A'), ['10.244.5.1', '10.244.5.2']);
    t.deepEqual(await short('peer-0.peers.default.svc.cluster.local', 'A'), ['10.244.5.1']);
    t.deepEqual(await short('10-244-5-2.peers.default.svc.cluster.local', 'A'), ['10.244.5.2']);
    t.is(await status('peer-2.peers.default.svc.cluster.local', 'A'), 'NXDOMAIN');
    t.deepEqual(await short('_gossip._tcp.peers.default.svc.cluster.local', 'SRV'), ['0 50 7000 peer-0.peers.default.svc.cluster.local.', '0 50 7000 10-244-5-2.peers.default.svc.cluster.local.']);
    t.deepEqual(await short('-x', '10.244.5.1'), ['peer-0.peers.default.svc.cluster.local.']);
    t.deepEqual(await short('-x', '10.244.5.2'), ['10-244-5-2.peers.default.svc.cluster.local.']);
    const cname = await dig(['docs.default.svc.cluster.local', 'A', '+noall', '+answer']);
    t.deepEqual(cname.trim().split('\n').map((l) => l.split(/\s+/).join(' ')), ['docs.default.svc.cluster.local. 7 IN CNAME docs.example.com.']);
    // Neither is programmed: no rule names them.
    t.notRegex((await topo.exec(topo.node, 'iptables-save', ['-t', 'nat'])).stdout, /default\/(peers|docs)/);

    // The program path: the search list of a Pod in namespace default, getent, and a connection by name.
    netnsEtc = join('/etc/netns', client.netns);
    await mkdir(netnsEtc, { recursive: true });
    await writeFile(join(netnsEtc, 'resolv.conf'), `search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver ${DNS}\noptions ndots:5 timeout:2 attempts:2\n`);
    const getent = await topo.exec(client.netns, 'getent', ['hosts', 'web'], { allowFail: true });
    t.is(getent.code, 0, getent.stderr);
    t.regex(getent.stdout, /^10\.96\.0\.50\s+web\.default\.svc\.cluster\.local$/m);
    t.regex((await topo.exec(client.netns, 'getent', ['hosts', 'db.shop'])).stdout, /^10\.96\.0\.60\s/m);
    const byName = await probe(topo, { host: 'web', port: 80, count: 3, timeoutMs: 5000 });
    t.deepEqual(byName.counts, { 'web-1': 3 }, JSON.stringify(byName));

    // A Service added, and one removed: answered after the sync that programmed them.
    await writeFile(join(source, 'api.json'), service('default', 'api', '10.96.0.70', [{ name: 'http', port: 80, targetPort: 8080 }], '10.244.1.2'));
    await unlink(join(source, 'db.json'));
    await until('drover answers api and no longer db', async () => (await short('api.default.svc.cluster.local')).includes('10.96.0.70') && (await status('db.shop.svc.cluster.local')) === 'NXDOMAIN', 30_000, 200);
    t.deepEqual((await probe(topo, { host: 'api', port: 80, timeoutMs: 5000 })).counts, { 'web-1': 1 });
    t.true(drover.alive);

    // Conntrack is bypassed for the DNS address: the queries above left no entry; the rules are drover's own chain.
    const raw = (await topo.exec(topo.node, 'iptables-save', ['-t', 'raw'])).stdout;
    t.regex(raw, /^-A PREROUTING -m comment --comment "drover node DNS" -j DROVER-DNS$/m);
    t.regex(raw, /^-A DROVER-DNS -d 169\.254\.20\.10\/32 -p udp -m udp --dport 53 -j NOTRACK$/m);
    const tracked = await topo.exec(topo.node, 'conntrack', ['-L', '-d', DNS], { allowFail: true });
    t.is(tracked.stdout.trim(), '', tracked.stderr);

    // The status file carries the DNS counters (refreshed at each sync and every 10 s).
    const statusDns = async () => (JSON.parse(await readFile(join(dir, 'status.json'), 'utf8')) as { dns?: { queries: number; answers: Record<string, number>; zoneAnswers: number } }).dns;
    await until('the status file counts the NXDOMAIN answers', async () => ((await statusDns())?.answers.NXDOMAIN ?? 0) >= 2, 30_000, 500);
    const counted = (await statusDns())!;
    t.true(counted.queries >= 15 && counted.zoneAnswers >= 15, JSON.stringify(counted));

    // drover cleanup removes the chains and the link.
    await drover.stop();
    const cleanup = await topo.exec(topo.node, process.execPath, [DROVER, 'cleanup']);
    t.regex(cleanup.stdout, /^removed the node DNS dataplane: 2 chains, 4 hook rules, 0 nftables tables, [01] links$/m);
    t.notRegex((await topo.exec(topo.node, 'iptables-save', ['-t', 'raw'])).stdout, /DROVER-DNS/);
  });

  test('--dns-address with --netns is refused in one line, before anything is written', async (t) => {
    const r = await droverOnce(['run', '--source', '/nonexistent', '--netns', 'drv-none-k', '--dns-address', DNS]);
    t.is(r.code, 1);
    t.is(r.stderr, `drover: --dns-address ${DNS} with --netns drv-none-k: the DNS server listens in drover's own network namespace; run drover inside drv-none-k (ip netns exec drv-none-k drover run …) instead of --netns\n`);
  });
}
