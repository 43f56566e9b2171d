/**
 * kube-proxy's conntrack settings, from a KubeProxyConfiguration given to
 * `drover sync --once --netns`, read back from the kernel: the namespace's
 * nf_conntrack timeouts and tcp_be_liberal are set there, the host's
 * nf_conntrack_max is never touched from another namespace (a warning
 * names it), and with tcpBeLiberal KUBE-FORWARD has no INVALID drop; the
 * same sync without the file leaves every sysctl alone and writes the drop.
 */
import test from 'ava';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run, runCommand } from '../../src/kernel/exec.ts';
import { NamespaceNfacct } from '../../src/kernel/nfacct/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { DROVER } from '../support/drover-bin.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const drover = (args: string[]) => run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 120_000 });
const NAMES = ['tcp_timeout_established', 'tcp_timeout_close_wait', 'udp_timeout', 'udp_timeout_stream', 'tcp_be_liberal'];
const CONFIG = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
conntrack:
  maxPerCore: 1048576
  min: 131072
  tcpEstablishedTimeout: 2h0m0s
  tcpCloseWaitTimeout: 30m0s
  udpTimeout: 45s
  udpStreamTimeout: 3m0s
  tcpBeLiberal: true
`;

/** The namespace's nf_conntrack settings of {@link NAMES}, name → value. */
async function settings(netns: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const n of NAMES) out[n] = (await run('sysctl', ['-n', `net.netfilter.nf_conntrack_${n}`], { netns })).stdout.trim();
  return out;
}

const unavailable = await testbedUnavailableReason();
if (unavailable) {
  test.skip(`conntrack sysctl tests skipped: ${unavailable}`, () => {});
} else {
  test('conntrack.* of --config set the programmed namespace\'s sysctls; the host\'s nf_conntrack_max is left alone; tcpBeLiberal leaves out the INVALID drop', async (t) => {
    const hostMax = (await readFile('/proc/sys/net/netfilter/nf_conntrack_max', 'utf8')).trim();
    const dir = await mkdtemp(join(tmpdir(), 'drover-conntrack-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'kube-proxy.yaml'), CONFIG);
    const base = ['sync', '--once', '--source', join(ROOT, 'examples'), '--iptables-backend', 'nft'];
    const forward = async (netns: string) => (await run('iptables-nft-save', ['-t', 'filter'], { netns })).stdout.split('\n').filter((l) => l.startsWith('-A KUBE-FORWARD '));

    await withNetns(async (netns) => {
      const untouched = await settings(netns);
      const plain = await drover([...base, '--state-dir', join(dir, 'plain'), '--netns', netns]);
      t.is(plain.code, 0, plain.stderr);
      t.deepEqual(await settings(netns), untouched, 'no setting asked for, none changed');
      // On a kernel with nfacct the drop also counts into kube-proxy's counter.
      const counted = (await new NamespaceNfacct(netns, runCommand).list().catch(() => [])).some((c) => c.name === 'ct_state_invalid_dropped_pkts');
      t.is((await forward(netns))[0], counted
        ? '-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP'
        : '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP');
    });

    await withNetns(async (netns) => {
      const sync = await drover([...base, '--state-dir', join(dir, 'config'), '--netns', netns, '--config', join(dir, 'kube-proxy.yaml')]);
      t.is(sync.code, 0, sync.stderr);
      t.deepEqual(await settings(netns), { tcp_timeout_established: '7200', tcp_timeout_close_wait: '1800', udp_timeout: '45', udp_timeout_stream: '180', tcp_be_liberal: '1' });
      t.regex(sync.stderr, new RegExp(`net\\.netfilter\\.nf_conntrack_max=\\d+: the host's limit, not set from network namespace ${netns}`));
      t.deepEqual(await forward(netns), [
        '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
        '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      ]);
    });
    t.is((await readFile('/proc/sys/net/netfilter/nf_conntrack_max', 'utf8')).trim(), hostMax);
  });
}
