/**
 * The drop of conntrack-INVALID packets (kubernetes issues 74839 and
 * 117924), on the real kernel: a client holds a TCP connection through a
 * ClusterIP to an endpoint in another namespace, and the endpoint's side
 * sends a segment far out of the connection's window (a raw socket in the
 * endpoint's namespace). The node's conntrack marks it INVALID, so its DNAT
 * is not undone:
 *
 * - with the drop (drover's default) it goes no further: the rule counts
 *   it, the client neither sees it nor answers with a reset, and the
 *   connection keeps working;
 * - with --conntrack-tcp-be-liberal the rule is absent and
 *   nf_conntrack_tcp_be_liberal=1 (set by drover in the node's namespace
 *   only), so conntrack takes the segment as ESTABLISHED and undoes its
 *   DNAT: the client sees an unacceptable segment of its own connection,
 *   answers with a plain ACK, and the connection keeps working;
 * - without either (drover before the drop), the segment reaches the client
 *   from the endpoint's own address, for a connection the client does not
 *   have, and the client answers with a reset.
 */
import test, { type ExecutionContext } from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { SystemIptables } from '../../src/kernel/iptables/exec.ts';
import { loadStaticRules, withInvalidDrop } from '../../src/modes/shared/kube-chains/static.ts';
import { applyConntrackSettings } from '../../src/conntrack/sysctls.ts';
import { namespaceSysctls } from '../../src/modes/shared/sysctls.ts';
import { run } from '../../src/kernel/exec.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { until } from '../support/wait.ts';

const CLUSTER_IP = '10.96.0.10';
const ENDPOINT = '10.244.1.2';
const PORT = 9090;
const DROP_RULE = '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP';

/** A TCP segment from `src:sport` to `dst:dport` (ACK|PSH, one byte) with the given sequence and acknowledgement numbers, sent from a raw socket. */
const INJECT = `
import socket, struct, sys
src, sport, dst, dport, seq, ack = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
def csum(b):
    if len(b) % 2: b += b'\\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
payload = b'x'
hdr = struct.pack('!HHIIBBHHH', sport, dport, seq, ack, 5 << 4, 0x18, 65535, 0, 0)
pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!BBH', 0, 6, len(hdr) + len(payload))
hdr = hdr[:16] + struct.pack('!H', csum(pseudo + hdr + payload)) + hdr[18:]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
s.sendto(hdr + payload, (dst, 0))
`;

/**
 * The endpoint: a TCP echo server for one connection (the testbed's HTTP
 * server closes idle connections). Each stdin line prints the connection's
 * next sequence number to send and to receive, read in TCP_REPAIR mode
 * (tcp(7); include/uapi/linux/tcp.h: TCP_REPAIR 19, TCP_REPAIR_QUEUE 20,
 * TCP_QUEUE_SEQ 21, TCP_RECV_QUEUE 1, TCP_SEND_QUEUE 2), so that the
 * injected segment is out of the window for certain (conntrack takes one
 * under its window as a retransmission, not as INVALID).
 */
const SERVER = `
import socket, sys, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(('${ENDPOINT}', ${PORT}))
srv.listen(1)
print('ready', flush=True)
c, _ = srv.accept()
def echo():
    while True:
        d = c.recv(4096)
        if not d: break
        c.sendall(d)
threading.Thread(target=echo, daemon=True).start()
for line in sys.stdin:
    c.setsockopt(socket.IPPROTO_TCP, 19, 1)
    c.setsockopt(socket.IPPROTO_TCP, 20, 2)
    snd = c.getsockopt(socket.IPPROTO_TCP, 21) & 0xffffffff
    c.setsockopt(socket.IPPROTO_TCP, 20, 1)
    rcv = c.getsockopt(socket.IPPROTO_TCP, 21) & 0xffffffff
    c.setsockopt(socket.IPPROTO_TCP, 19, 0)
    print('seq %d %d' % (snd, rcv), flush=True)
`;

/** The client: connects to the ClusterIP and prints its port; each stdin line is sent and its echo printed; errors and close are printed. */
const CLIENT = `const s = require('net').connect(80, '${CLUSTER_IP}', () => console.log('port ' + s.localPort));
s.on('data', (d) => console.log('echo ' + d.toString().trim()));
s.on('error', (e) => console.log('error ' + e.code));
s.on('close', () => console.log('closed'));
process.stdin.on('data', (d) => s.write(d));`;

/** A long-running process in `netns`, with its stdout lines. */
function spawnIn(netns: string, args: readonly string[]): { proc: ChildProcess; lines: string[] } {
  const proc = spawn('ip', ['netns', 'exec', netns, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let buf = '';
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    lines.push(...parts);
  });
  return { proc, lines };
}

/** TCP counters of namespace `netns` (/proc/net/snmp): InSegs, OutRsts. */
async function tcpCounters(topo: Topology, netns: string): Promise<{ inSegs: number; outRsts: number }> {
  const tcp = (await topo.exec(netns, 'cat', ['/proc/net/snmp'])).stdout.split('\n').filter((l) => l.startsWith('Tcp:'));
  const [names, values] = tcp.map((l) => l.split(/\s+/).slice(1));
  const get = (n: string) => Number(values![names!.indexOf(n)]);
  return { inSegs: get('InSegs'), outRsts: get('OutRsts') };
}

/** Packets the INVALID drop of the node's KUBE-FORWARD counted; undefined when the rule is not there. */
async function dropped(topo: Topology): Promise<number | undefined> {
  const save = (await topo.exec(topo.node, 'iptables-nft-save', ['-c', '-t', 'filter'])).stdout;
  const line = save.split('\n').find((l) => l.endsWith(DROP_RULE));
  return line === undefined ? undefined : Number(/^\[(\d+):/.exec(line)![1]);
}

type Variant = 'drop' | 'liberal' | 'neither';

/** Program the node as `variant` asks, connect, inject one out-of-window segment towards the client, and return what the client saw. */
async function outOfWindow(t: ExecutionContext, variant: Variant): Promise<void> {
  const topo = await createTopology({ backends: [{ name: 'e1', ip: ENDPOINT, ports: [8080] }] });
  const procs: ChildProcess[] = [];
  try {
    if (variant === 'liberal') {
      await applyConntrackSettings(
        { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0, tcpCloseWaitTimeout: 0, udpTimeout: 0, udpStreamTimeout: 0, tcpBeLiberal: true },
        { sysctls: namespaceSysctls(topo.node), netns: topo.node },
        silentLogger(),
      );
    }
    const backend = new IptablesBackend({
      exec: new SystemIptables({ variant: 'nft', netns: topo.node }),
      render: { masqueradeAll: false, ...(variant === 'liberal' ? { tcpBeLiberal: true } : {}) },
      statics: withInvalidDrop(loadStaticRules(), variant !== 'drop'),
      logger: silentLogger(),
    });
    await backend.sync(snap(sp('default/echo:tcp', CLUSTER_IP, 80, [ep(`${ENDPOINT}:${PORT}`)])), { full: true, changed: new Set() });
    t.is(await dropped(topo), variant === 'drop' ? 0 : undefined);
    t.is((await topo.exec(topo.node, 'sysctl', ['-n', 'net.netfilter.nf_conntrack_tcp_be_liberal'])).stdout.trim(), variant === 'liberal' ? '1' : '0');

    const server = spawnIn(topo.backend('e1').netns, ['python3', '-c', SERVER]);
    procs.push(server.proc);
    await until('the echo server', async () => server.lines.includes('ready'), 30_000);
    const client = spawnIn(topo.client().netns, [process.execPath, '-e', CLIENT]);
    procs.push(client.proc);
    await until('the connection', async () => client.lines.some((l) => l.startsWith('port ')), 30_000);
    const clientPort = Number(client.lines.find((l) => l.startsWith('port '))!.slice(5));
    client.proc.stdin!.write('one\n');
    await until('the first echo', async () => client.lines.includes('echo one'), 30_000);
    server.proc.stdin!.write('seq\n');
    await until('the sequence numbers', async () => server.lines.some((l) => l.startsWith('seq ')), 30_000);
    const [snd, rcv] = server.lines.find((l) => l.startsWith('seq '))!.slice(4).split(' ').map(Number) as [number, number];
    // A round trip after leaving TCP_REPAIR (which sends a window probe), so that the probe is counted before `before`.
    client.proc.stdin!.write('two\n');
    await until('the second echo', async () => client.lines.includes('echo two'), 30_000);

    const before = await tcpCounters(topo, topo.client().netns);
    // 2^30 past the next byte to send: over the upper bound of the window (nf_conntrack_proto_tcp.c tcp_in_window, "SEQ is over
    // upper bound"), with an acknowledgement the client's side accepts (what it had sent before "two").
    const seq = String((snd + 4 + 2 ** 30) % 2 ** 32);
    await run('python3', ['-c', INJECT, ENDPOINT, String(PORT), topo.client().ip, String(clientPort), seq, String(rcv)], { netns: topo.backend('e1').netns });

    if (variant === 'drop') {
      await until('the INVALID drop to count the segment', async () => (await dropped(topo)) === 1, 30_000);
      const after = await tcpCounters(topo, topo.client().netns);
      t.is(after.inSegs, before.inSegs, 'the client received nothing');
      t.is(after.outRsts, before.outRsts, 'the client sent no reset');
    } else if (variant === 'liberal') {
      await until('the client to receive the segment', async () => (await tcpCounters(topo, topo.client().netns)).inSegs > before.inSegs, 30_000);
      t.is((await tcpCounters(topo, topo.client().netns)).outRsts, before.outRsts, 'the client sent no reset');
    } else {
      await until('the client to answer with a reset', async () => (await tcpCounters(topo, topo.client().netns)).outRsts > before.outRsts, 30_000);
    }
    // The connection itself survives in every case (the reset goes to the endpoint's address, a tuple of no connection).
    client.proc.stdin!.write('three\n');
    await until('the third echo', async () => client.lines.includes('echo three'), 30_000);
    t.false(client.lines.some((l) => l.startsWith('error') || l === 'closed'), client.lines.join('\n'));
  } finally {
    for (const p of procs) p.kill();
    await topo.destroy();
  }
}

const unavailable = (await testbedUnavailableReason()) ?? ((await run('python3', ['-c', 'import socket'], { allowFail: true }).catch(() => ({ code: 1 }))).code !== 0 ? 'needs python3 (the raw-socket sender)' : undefined);

if (unavailable) {
  test.skip(`conntrack INVALID tests skipped: ${unavailable}`, () => {});
} else {
  test('an out-of-window TCP segment of a DNATed flow is dropped by KUBE-FORWARD: the client neither sees it nor resets', (t) => outOfWindow(t, 'drop'));
  test('with --conntrack-tcp-be-liberal: no drop rule, nf_conntrack_tcp_be_liberal=1 in the node namespace, the segment is de-NATed and the client does not reset', (t) =>
    outOfWindow(t, 'liberal'));
  test('without the drop and without be_liberal (drover before the drop): the segment reaches the client un-NATed and it answers with a reset', (t) => outOfWindow(t, 'neither'));
}
