/**
 * kube-proxy's nfacct counters (src/kernel/nfacct/, src/modes/iptables/nfacct*.ts):
 * the exact nfnetlink accounting messages and the decoding of a reply, the
 * names refused before any message, the Fake, the helper's argv and
 * answers, the probe at start (and its fallback), the exact rules with and
 * without the counters, their iptables-save form, the trace parser, and the
 * two metrics read at scrape time (present, and absent without nfacct).
 */
import test from 'ava';
import { Registry } from 'prom-client';
import { NfacctError, NfacctNameError, NfacctNotFoundError } from '../../src/errors.ts';
import { FakeNfacct } from '../../src/kernel/nfacct/fake.ts';
import { accountingType, checkCounterName, decodeCounter, encodeDumpRequest, encodeNameRequest, NFNL_MSG_ACCT_GET, NFNL_MSG_ACCT_NEW } from '../../src/kernel/nfacct/codec.ts';
import { answer, parseHelperArgs } from '../../src/kernel/nfacct/helper.ts';
import { canonicalRule } from '../../src/kernel/iptables/canonical.ts';
import { externalChainName } from '../../src/modes/shared/kube-chains/names.ts';
import { COUNTED_INVALID_DROP_RULE, ensureCounters, presentCounters, withCountedInvalidDrop } from '../../src/modes/iptables/nfacct.ts';
import { CT_STATE_INVALID_DROPPED, KUBE_PROXY_COUNTERS, LOCALHOST_NODEPORTS_ACCEPTED } from '../../src/modes/iptables/nfacct-names.ts';
import { registerNfacctMetrics } from '../../src/modes/iptables/nfacct-metrics.ts';
import { renderServicePort } from '../../src/modes/iptables/render.ts';
import { parseRule } from '../../src/kernel/iptables/rule.ts';
import { loadStaticRules, withInvalidDrop } from '../../src/modes/shared/kube-chains/static.ts';
import { ipv4Frontends } from '../../src/model/types.ts';
import type { Logger } from '../../src/util/log.ts';
import { ep, sp } from '../support/snapshots.ts';

// ---------------------------------------------------------------------------
// Messages (include/uapi/linux/netfilter/nfnetlink_acct.h)
// ---------------------------------------------------------------------------

test('the message types are NFNL_SUBSYS_ACCT (7) << 8 | command', (t) => {
  t.is(accountingType(NFNL_MSG_ACCT_NEW), 0x700);
  t.is(accountingType(NFNL_MSG_ACCT_GET), 0x701);
});

test('a NEW or GET of one name is nfgenmsg then NFACCT_NAME, NUL-terminated and padded to 4 bytes', (t) => {
  const msg = encodeNameRequest('ct_state_invalid_dropped_pkts');
  // nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 0; nla_len 4 + 30 = 34, type 1; 29 characters, NUL, 2 bytes of padding.
  const expected = Buffer.concat([Buffer.from([0, 0, 0, 0]), Buffer.from([34, 0, 1, 0]), Buffer.from('ct_state_invalid_dropped_pkts\0', 'ascii'), Buffer.from([0, 0])]);
  t.deepEqual(msg, expected);
  t.deepEqual(encodeDumpRequest(), Buffer.from([0, 0, 0, 0]));
});

test('names are refused before any message: only 1-31 characters of a-z, 0-9 and _', (t) => {
  t.is(checkCounterName('localhost_nps_accepted_pkts'), 'localhost_nps_accepted_pkts');
  t.is(checkCounterName('a'.repeat(31)), 'a'.repeat(31));
  for (const bad of ['', 'a'.repeat(32), 'Upper', 'with space', 'dash-ed', 'nul\0', 'x\ny', 42, undefined]) {
    t.throws(() => checkCounterName(bad), { instanceOf: NfacctNameError }, JSON.stringify(bad));
  }
  t.throws(() => encodeNameRequest('../x'), { instanceOf: NfacctNameError });
});

/** A reply payload as the kernel builds it (nfnl_acct_fill_info): nfgenmsg, NFACCT_NAME, NFACCT_PKTS and NFACCT_BYTES as __be64, NFACCT_USE. */
function reply(name: string, packets: bigint, bytes: bigint): Buffer {
  const attr = (type: number, data: Buffer) => {
    const len = 4 + data.length;
    const b = Buffer.alloc((len + 3) & ~3);
    b.writeUInt16LE(len, 0);
    b.writeUInt16LE(type, 2);
    data.copy(b, 4);
    return b;
  };
  const be64 = (v: bigint) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(v);
    return b;
  };
  const use = Buffer.alloc(4);
  use.writeUInt32BE(1);
  return Buffer.concat([Buffer.from([0, 0, 0, 0]), attr(1, Buffer.from(`${name}\0`)), attr(2, be64(packets)), attr(3, be64(bytes)), attr(4, use)]);
}

test('a reply decodes to its name and big-endian 64-bit counters', (t) => {
  t.deepEqual(decodeCounter(reply('localhost_nps_accepted_pkts', 3n, 180n)), { name: 'localhost_nps_accepted_pkts', packets: 3, bytes: 180 });
  t.deepEqual(decodeCounter(reply('x', 2n ** 40n, 2n ** 50n)), { name: 'x', packets: 2 ** 40, bytes: 2 ** 50 });
});

test('a reply without its counters or shorter than nfgenmsg is refused', (t) => {
  const full = reply('x', 1n, 2n);
  t.throws(() => decodeCounter(full.subarray(0, 2)), { instanceOf: NfacctError });
  t.throws(() => decodeCounter(full.subarray(0, 4 + 8)), { instanceOf: NfacctError, message: /NFACCT_PKTS/ });
});

// ---------------------------------------------------------------------------
// The Fake and the helper
// ---------------------------------------------------------------------------

test('the Fake: ensure creates at 0 and keeps counts; get of a missing object throws NfacctNotFoundError; list in creation order', async (t) => {
  const f = new FakeNfacct();
  await f.ensure('b_counter');
  await f.ensure('a_counter');
  f.count('b_counter', 2, 120);
  await f.ensure('b_counter');
  t.deepEqual(await f.get('b_counter'), { name: 'b_counter', packets: 2, bytes: 120 });
  await t.throwsAsync(() => f.get('c_counter'), { instanceOf: NfacctNotFoundError });
  t.deepEqual(await f.list(), [
    { name: 'b_counter', packets: 2, bytes: 120 },
    { name: 'a_counter', packets: 0, bytes: 0 },
  ]);
  await t.throwsAsync(() => f.ensure('Bad'), { instanceOf: NfacctNameError });
});

test('the helper: argv checked (names too) before anything runs; answers one JSON line', async (t) => {
  t.deepEqual(parseHelperArgs(['ensure', 'a', 'b']), { op: 'ensure', names: ['a', 'b'] });
  t.deepEqual(parseHelperArgs(['get', 'a']), { op: 'get', name: 'a' });
  t.deepEqual(parseHelperArgs(['list']), { op: 'list' });
  t.throws(() => parseHelperArgs(['get']));
  t.throws(() => parseHelperArgs(['delete', 'a']));
  t.throws(() => parseHelperArgs(['ensure', 'a b']), { instanceOf: NfacctNameError });
  const f = new FakeNfacct();
  t.is(await answer(f, { op: 'ensure', names: ['a'] }), '{"ok":{"a":null}}');
  t.is(await answer(f, { op: 'get', name: 'a' }), '{"ok":{"name":"a","packets":0,"bytes":0}}');
  t.is(await answer(f, { op: 'get', name: 'b' }), '{"error":{"message":"no nfacct object \\"b\\"","code":"ENOENT"}}');
  t.is(await answer(new FakeNfacct('EPERM'), { op: 'ensure', names: ['a'] }), '{"ok":{"a":{"message":"nfacct request refused: Request rejected: EPERM","code":"EPERM"}}}');
});

// ---------------------------------------------------------------------------
// The probe at start
// ---------------------------------------------------------------------------

/** A logger that keeps its warnings. */
function recording(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const logger = { warn: (obj: { counter: string }, msg: string) => void warnings.push(`${obj.counter}: ${msg}`), info: () => undefined, debug: () => undefined } as unknown as Logger;
  return { logger, warnings };
}

test('ensureCounters creates both of kube-proxy\'s counters and logs nothing', async (t) => {
  const f = new FakeNfacct();
  const { logger, warnings } = recording();
  t.deepEqual([...(await ensureCounters(f, logger))], [...KUBE_PROXY_COUNTERS]);
  t.deepEqual(f.calls, ['ensure ct_state_invalid_dropped_pkts', 'ensure localhost_nps_accepted_pkts']);
  t.deepEqual(warnings, []);
  t.deepEqual([...(await presentCounters(f))], [...KUBE_PROXY_COUNTERS]);
});

test('without nfacct ensureCounters logs each counter once and returns none; presentCounters finds none', async (t) => {
  const f = new FakeNfacct('EPROTONOSUPPORT');
  const { logger, warnings } = recording();
  t.deepEqual([...(await ensureCounters(f, logger))], []);
  t.deepEqual(warnings, [
    'ct_state_invalid_dropped_pkts: cannot create the nfacct counter: its rule counts nothing and its metric is not served',
    'localhost_nps_accepted_pkts: cannot create the nfacct counter: its rule counts nothing and its metric is not served',
  ]);
  t.deepEqual([...(await presentCounters(f))], []);
});

// ---------------------------------------------------------------------------
// Rules, as kube-proxy writes them (pkg/proxy/iptables/proxier.go)
// ---------------------------------------------------------------------------

const FORWARD_PLAIN = [
  '-m conntrack --ctstate INVALID -j DROP',
  '-m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
  '-m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
];

test('KUBE-FORWARD: the INVALID drop counts into ct_state_invalid_dropped_pkts only when that counter exists', (t) => {
  const statics = loadStaticRules();
  t.deepEqual(withCountedInvalidDrop(statics, new Set()).chains.get('filter')!.get('KUBE-FORWARD'), FORWARD_PLAIN);
  t.is(withCountedInvalidDrop(statics, new Set([LOCALHOST_NODEPORTS_ACCEPTED])), statics);
  const counted = withCountedInvalidDrop(statics, new Set([CT_STATE_INVALID_DROPPED]));
  t.deepEqual(counted.chains.get('filter')!.get('KUBE-FORWARD'), [
    '-m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP',
    ...FORWARD_PLAIN.slice(1),
  ]);
  t.is(COUNTED_INVALID_DROP_RULE, '-m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP');
  // The shipped file is untouched, and the nat table too.
  t.deepEqual(statics.chains.get('filter')!.get('KUBE-FORWARD'), FORWARD_PLAIN);
  t.is(counted.chains.get('nat'), statics.chains.get('nat'));
  // With --conntrack-tcp-be-liberal there is no drop to count.
  const liberal = withInvalidDrop(statics, true);
  t.deepEqual(withCountedInvalidDrop(liberal, new Set([CT_STATE_INVALID_DROPPED])).chains.get('filter')!.get('KUBE-FORWARD'), FORWARD_PLAIN.slice(1));
});

const NODEPORT = sp('default/web:http', '172.30.0.10', 80, [ep('10.1.1.2:8080')], { type: 'NodePort', frontends: ipv4Frontends('172.30.0.10', 30080) });
const EXT = externalChainName('default/web:http', 'tcp');
const nodePortRules = (opts: Parameters<typeof renderServicePort>[1]) => renderServicePort(NODEPORT, opts).shared.filter((r) => r.chain === 'KUBE-NODEPORTS');

test('KUBE-NODEPORTS: the counted 127.0.0.0/8 jump comes first with countLocalhostNodePorts, only for a NodePort with endpoints', (t) => {
  const plain = { table: 'nat', chain: 'KUBE-NODEPORTS', rule: `-p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -j ${EXT}` };
  t.deepEqual(nodePortRules({ masqueradeAll: false }), [plain]);
  t.deepEqual(nodePortRules({ masqueradeAll: false, countLocalhostNodePorts: true }), [
    { table: 'nat', chain: 'KUBE-NODEPORTS', rule: `-d 127.0.0.0/8 -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j ${EXT}` },
    plain,
  ]);
  // No endpoints: no jump at all, counted or not.
  const none = sp('default/web:http', '172.30.0.10', 80, [], { type: 'NodePort', frontends: ipv4Frontends('172.30.0.10', 30080) });
  t.deepEqual(renderServicePort(none, { masqueradeAll: false, countLocalhostNodePorts: true }).shared.filter((r) => r.chain === 'KUBE-NODEPORTS'), []);
});

test('the nfacct match in iptables-save form has two spaces; canonicalRule maps the rendered one to it, idempotently', (t) => {
  const rendered = COUNTED_INVALID_DROP_RULE;
  const saved = '-m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP';
  t.is(canonicalRule(rendered), saved);
  t.is(canonicalRule(saved), saved);
  t.is(canonicalRule(FORWARD_PLAIN[0]!), FORWARD_PLAIN[0]!);
});

test('the trace parser takes the nfacct match as no condition: the counted drop reads as the plain one', (t) => {
  const chains = new Set<string>();
  const counted = parseRule('KUBE-FORWARD', '-m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP', chains);
  const plain = parseRule('KUBE-FORWARD', FORWARD_PLAIN[0]!, chains);
  t.deepEqual(counted.matches, plain.matches);
  t.deepEqual(counted.target, plain.target);
});

// ---------------------------------------------------------------------------
// Metrics (pkg/proxy/metrics/metrics.go)
// ---------------------------------------------------------------------------

test('the two metrics read the counters at each scrape, as kube-proxy names and describes them, without labels', async (t) => {
  const f = new FakeNfacct();
  const registry = new Registry();
  registerNfacctMetrics(registry, f);
  await ensureCounters(f, recording().logger);
  f.count(CT_STATE_INVALID_DROPPED, 3, 180);
  t.is(
    await registry.metrics(),
    [
      '# HELP kubeproxy_iptables_ct_state_invalid_dropped_packets_total packets dropped by iptables to work around conntrack problems',
      '# TYPE kubeproxy_iptables_ct_state_invalid_dropped_packets_total counter',
      'kubeproxy_iptables_ct_state_invalid_dropped_packets_total 3',
      '',
      '# HELP kubeproxy_iptables_localhost_nodeports_accepted_packets_total Number of packets accepted on nodeports of loopback interface',
      '# TYPE kubeproxy_iptables_localhost_nodeports_accepted_packets_total counter',
      'kubeproxy_iptables_localhost_nodeports_accepted_packets_total 0',
      '',
    ].join('\n'),
  );
  // One list per scrape serves both metrics.
  t.deepEqual(f.calls.filter((c) => c === 'list'), ['list']);
});

test('without nfacct (or without a counter) the metric has no sample; a failed read is reported', async (t) => {
  const errors: string[] = [];
  const registry = new Registry();
  registerNfacctMetrics(registry, new FakeNfacct('EPROTONOSUPPORT'), (err) => void errors.push(err.message));
  const text = await registry.metrics();
  t.false(/^kubeproxy_iptables_\w+ \d/m.test(text), text);
  t.deepEqual(errors, ['nfacct request refused: Request rejected: EPROTONOSUPPORT']);
  const only = new FakeNfacct();
  await only.ensure(LOCALHOST_NODEPORTS_ACCEPTED);
  const registry2 = new Registry();
  registerNfacctMetrics(registry2, only);
  const text2 = await registry2.metrics();
  t.regex(text2, /^kubeproxy_iptables_localhost_nodeports_accepted_packets_total 0$/m);
  t.false(/^kubeproxy_iptables_ct_state_invalid_dropped_packets_total \d/m.test(text2));
});
