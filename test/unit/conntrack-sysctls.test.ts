/** kube-proxy's conntrack settings as nf_conntrack sysctls (conntrack/sysctls.ts), against a fake /proc/sys. */
import test from 'ava';
import { applyConntrackSettings, conntrackMax, conntrackSysctls, type ConntrackSettings } from '../../src/conntrack/sysctls.ts';
import type { Sysctls } from '../../src/modes/shared/sysctls.ts';
import { silentLogger } from '../../src/util/log.ts';

const NONE: ConntrackSettings = { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0, tcpCloseWaitTimeout: 0, udpTimeout: 0, udpStreamTimeout: 0, tcpBeLiberal: false };
const ALL: ConntrackSettings = { maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: 86400, tcpCloseWaitTimeout: 3600, udpTimeout: 30, udpStreamTimeout: 120, tcpBeLiberal: true };

/** An in-memory /proc/sys; `readOnly` names settings whose writes fail as the kernel refuses them (EACCES). */
function fakeSysctls(values: Record<string, string>, readOnly: readonly string[] = []): Sysctls & { values: Record<string, string> } {
  return {
    values,
    read: async (name) => values[name],
    write: async (name, value) => {
      if (readOnly.includes(name)) throw new Error(`EACCES: permission denied, open '/proc/sys/${name.replaceAll('.', '/')}'`);
      values[name] = value;
    },
  };
}

const KERNEL = {
  'net.netfilter.nf_conntrack_max': '65536',
  'net.netfilter.nf_conntrack_tcp_timeout_established': '432000',
  'net.netfilter.nf_conntrack_tcp_timeout_close_wait': '60',
  'net.netfilter.nf_conntrack_tcp_be_liberal': '0',
  'net.netfilter.nf_conntrack_udp_timeout': '30',
  'net.netfilter.nf_conntrack_udp_timeout_stream': '180',
};

test("nf_conntrack_max is kube-proxy's getConntrackMax: maxPerCore × CPUs, at least min; 0 without maxPerCore", (t) => {
  t.is(conntrackMax({ maxPerCore: 32768, min: 131072 }, 2), 131072);
  t.is(conntrackMax({ maxPerCore: 32768, min: 131072 }, 8), 262144);
  t.is(conntrackMax({ maxPerCore: 0, min: 131072 }, 8), 0);
});

test('0 (false) leaves a setting alone: nothing is asked for when every setting is 0', (t) => {
  t.deepEqual(conntrackSysctls(NONE, 4), []);
  t.deepEqual(
    conntrackSysctls({ ...NONE, udpTimeout: 45 }, 4).map((s) => `${s.name}=${s.value}`),
    ['net.netfilter.nf_conntrack_udp_timeout=45'],
  );
});

test('without --netns: every setting that differs is written, nf_conntrack_max too, and hashsize is raised to a quarter of it', async (t) => {
  const sysctls = fakeSysctls({ ...KERNEL });
  let hashsize = 16384;
  const applied = await applyConntrackSettings(ALL, { sysctls, hashsize: { read: async () => hashsize, write: async (v) => void (hashsize = v) } }, silentLogger(), 2);
  t.deepEqual(applied.written, [
    'net.netfilter.nf_conntrack_max=131072',
    'nf_conntrack.hashsize=32768',
    'net.netfilter.nf_conntrack_tcp_timeout_established=86400',
    'net.netfilter.nf_conntrack_tcp_timeout_close_wait=3600',
    'net.netfilter.nf_conntrack_tcp_be_liberal=1',
    'net.netfilter.nf_conntrack_udp_timeout_stream=120',
  ]);
  t.deepEqual(applied.skipped, []);
  t.is(sysctls.values['net.netfilter.nf_conntrack_udp_timeout'], '30');
  t.is(hashsize, 32768);
});

test("with --netns: the host's nf_conntrack_max and hashsize are never touched; the namespace's settings are", async (t) => {
  const sysctls = fakeSysctls({ ...KERNEL });
  const applied = await applyConntrackSettings(ALL, { sysctls, netns: 'node-ns', hashsize: { read: async () => t.fail('hashsize read') as never, write: async () => t.fail('hashsize written') } }, silentLogger(), 2);
  t.is(sysctls.values['net.netfilter.nf_conntrack_max'], '65536');
  t.deepEqual(applied.skipped, ["net.netfilter.nf_conntrack_max=131072: the host's limit, not set from network namespace node-ns"]);
  t.is(sysctls.values['net.netfilter.nf_conntrack_tcp_timeout_established'], '86400');
  t.is(sysctls.values['net.netfilter.nf_conntrack_tcp_be_liberal'], '1');
});

test('a read-only nf_conntrack_max (a namespace other than the initial one) is skipped with its reason; a namespace setting that cannot be written is an error naming it', async (t) => {
  const readOnlyMax = fakeSysctls({ ...KERNEL }, ['net.netfilter.nf_conntrack_max']);
  const applied = await applyConntrackSettings({ ...NONE, maxPerCore: 65536, udpTimeout: 10 }, { sysctls: readOnlyMax }, silentLogger(), 2);
  t.deepEqual(applied.written, ['net.netfilter.nf_conntrack_udp_timeout=10']);
  t.regex(applied.skipped[0]!, /^net\.netfilter\.nf_conntrack_max=131072: EACCES/);
  const readOnlyTimeout = fakeSysctls({ ...KERNEL }, ['net.netfilter.nf_conntrack_udp_timeout']);
  await t.throwsAsync(applyConntrackSettings({ ...NONE, udpTimeout: 10 }, { sysctls: readOnlyTimeout }, silentLogger(), 2), { message: /^cannot set sysctl net\.netfilter\.nf_conntrack_udp_timeout=10: EACCES/ });
  await t.throwsAsync(applyConntrackSettings({ ...NONE, udpTimeout: 10 }, { sysctls: fakeSysctls({}) }, silentLogger(), 2), { message: 'sysctl net.netfilter.nf_conntrack_udp_timeout does not exist (is nf_conntrack loaded?)' });
});
