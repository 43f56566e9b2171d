/**
 * kube-proxy's nfacct counters on the real kernel, end to end: `drover run`
 * in iptables mode inside a testbed's node namespace (not with --netns, so
 * that its metrics server listens on the namespace's loopback), with
 * `--nodeport-localhost`, for iptables-nft and iptables-legacy:
 *
 * - the counters exist in the node namespace only (read through the
 *   client's helper, kernel/nfacct/netns.ts), and the rules name them as
 *   kube-proxy writes them (read back with iptables-save);
 * - connections from the node to 127.0.0.1:nodePort reach a backend and
 *   count one packet each (the nat table sees the first packet of a
 *   connection) in localhost_nps_accepted_pkts;
 * - TCP segments with an invalid flag combination (SYN|FIN, which
 *   conntrack marks INVALID: nf_conntrack_proto_tcp.c tcp_valid_flags),
 *   sent from a backend towards the client through the node, are dropped
 *   by KUBE-FORWARD and counted in ct_state_invalid_dropped_pkts;
 * - both counts grow by what was sent, read through the client and through
 *   /metrics.
 */
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NamespaceNfacct } from '../../src/kernel/nfacct/netns.ts';
import { runCommand } from '../../src/kernel/exec.ts';
import { run } from '../../src/kernel/exec.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { until } from '../support/wait.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DROVER = join(ROOT, 'bin/drover.js');
const ENDPOINT = '10.244.1.2';

const MANIFEST = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.96.0.50
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30090, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: ["${ENDPOINT}"]
  conditions: {ready: true}
  nodeName: node-b
`;

/** `count` TCP segments with SYN|FIN (flags 0x03) from src:sport to dst:dport, from a raw socket. */
const SYN_FIN = `
import socket, struct, sys
src, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
def csum(b):
    if len(b) % 2: b += b'\\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
for i in range(count):
    hdr = struct.pack('!HHIIBBHHH', 40000 + i, 9999, 1000, 0, 5 << 4, 0x03, 65535, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!BBH', 0, 6, len(hdr))
    hdr = hdr[:16] + struct.pack('!H', csum(pseudo + hdr)) + hdr[18:]
    s.sendto(hdr, (dst, 0))
`;

const unavailable =
  (await testbedUnavailableReason()) ?? ((await run('python3', ['-c', 'import socket'], { allowFail: true }).catch(() => ({ code: 1 }))).code !== 0 ? 'needs python3 (the raw-socket sender)' : undefined);

/** The packets of counter `name` in a /metrics text; undefined without a sample. */
function metric(text: string, name: string): number | undefined {
  const m = new RegExp(`^kubeproxy_iptables_${name} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

async function countersEndToEnd(t: ExecutionContext, variant: 'nft' | 'legacy'): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-nfacct-'));
  const topo = await createTopology({ backends: [{ name: 'b1', ip: ENDPOINT, ports: [8080] }] });
  const child = { proc: undefined as ReturnType<typeof spawn> | undefined };
  try {
    await run('mkdir', ['-p', join(dir, 'manifests')]);
    await writeFile(join(dir, 'manifests', 'web.yaml'), MANIFEST);
    await run('ip', ['link', 'set', 'lo', 'up'], { netns: topo.node });
    const args = ['run', '--source', join(dir, 'manifests'), '--state-dir', join(dir, 'state'), '--status-file', join(dir, 'status.json'), '--iptables-backend', variant];
    args.push('--nodeport-localhost', '--cluster-cidr', '10.244.0.0/16', '--hostname-override', 'node-a', '--metrics-bind-address', '127.0.0.1:10249', '--healthz-bind-address', '');
    const proc = spawn('ip', ['netns', 'exec', topo.node, process.execPath, DROVER, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.proc = proc;
    let logs = '';
    proc.stderr!.on('data', (b: Buffer) => (logs += b.toString()));
    const scrape = async () => (await run('curl', ['-s', '-o', '-', `http://127.0.0.1:10249/metrics`], { netns: topo.node, allowFail: true })).stdout;
    await until('the first sync', async () => /^kubeproxy_sync_full_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} [1-9]/m.test(await scrape()), 60_000);

    // The rules, read back as iptables-save prints them (two spaces after --nfacct-name).
    const save = async (table: string) => (await run(`iptables-${variant}-save`, ['-t', table], { netns: topo.node })).stdout;
    t.true((await save('filter')).includes('\n-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP\n'), logs);
    const nat = await save('nat');
    t.regex(nat, /^-A KUBE-NODEPORTS -d 127\.0\.0\.0\/8 -p tcp -m comment --comment "default\/web:http" -m tcp --dport 30090 -m nfacct --nfacct-name {2}localhost_nps_accepted_pkts -j KUBE-EXT-\w{16}$/m);
    t.regex(nat, /^-A KUBE-NODEPORTS -p tcp -m comment --comment "default\/web:http" -m tcp --dport 30090 -j KUBE-EXT-\w{16}$/m);

    // The counters exist in the node namespace, at 0, and not in this machine's own namespace.
    const nfacct = new NamespaceNfacct(topo.node, runCommand);
    t.deepEqual(await nfacct.list(), [
      { name: 'ct_state_invalid_dropped_pkts', packets: 0, bytes: 0 },
      { name: 'localhost_nps_accepted_pkts', packets: 0, bytes: 0 },
    ]);
    const before = await scrape();
    t.is(metric(before, 'ct_state_invalid_dropped_packets_total'), 0);
    t.is(metric(before, 'localhost_nodeports_accepted_packets_total'), 0);

    // Three connections to 127.0.0.1:nodePort, each reaching the backend.
    const r = await probe(topo, { from: topo.node, host: '127.0.0.1', port: 30090, count: 3, timeoutMs: 3000 });
    t.deepEqual([r.counts, r.errors], [{ b1: 3 }, {}]);
    t.like(await nfacct.get('localhost_nps_accepted_pkts'), { packets: 3 });

    // Two INVALID segments forwarded through the node: dropped and counted.
    await run('python3', ['-c', SYN_FIN, ENDPOINT, topo.client().ip, '2'], { netns: topo.backend('b1').netns });
    await until('the INVALID drop to count both segments', async () => (await nfacct.get('ct_state_invalid_dropped_pkts')).packets >= 2, 30_000);
    t.like(await nfacct.get('ct_state_invalid_dropped_pkts'), { packets: 2, bytes: 2 * 40 });

    // One read of the counters serves the scrapes of the next second (nfacct-metrics.ts): on a quick machine the one
    // above can still be served here. Wait for a scrape that reads the counters again.
    let after = '';
    await until('a scrape that reads the counters again', async () => {
      after = await scrape();
      return (metric(after, 'ct_state_invalid_dropped_packets_total') ?? 0) > 0;
    }, 30_000);
    t.is(metric(after, 'ct_state_invalid_dropped_packets_total'), 2);
    t.is(metric(after, 'localhost_nodeports_accepted_packets_total'), 3);
    t.false(logs.includes('cannot create the nfacct counter'), logs);
  } finally {
    if (child.proc) {
      child.proc.kill('SIGTERM');
      await new Promise((r) => child.proc!.once('exit', r));
    }
    await topo.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}

if (unavailable) {
  test.skip(`nfacct tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('iptables-nft: the counters grow by the localhost NodePort connections and the INVALID segments, through the client and /metrics', (t) => countersEndToEnd(t, 'nft'));
  test.serial('iptables-legacy: the same', (t) => countersEndToEnd(t, 'legacy'));
}
