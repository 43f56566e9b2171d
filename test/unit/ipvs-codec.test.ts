import test from 'ava';
import { NetlinkDecodeError } from '../../src/kernel/netlink/nlattr.ts';
import { readFileSync } from 'node:fs';
import { endianness } from 'node:os';
import {
  AF_INET,
  AF_INET6,
  AttrWriter,
  IPVS_CMD,
  IPVS_CMD_ATTR,
  IPVS_DEST_ATTR,
  IPVS_GENL_VERSION,
  IPVS_INFO_ATTR,
  IPVS_STATS_ATTR,
  IPVS_SVC_ATTR,
  IP_VS_CONN_F,
  IP_VS_SCHEDNAME_MAXLEN,
  IP_VS_SVC_F,
  IP_VS_VERSION_CODE,
  IpvsDecodeError,
  IpvsUnsupportedError,
  IpvsValidationError,
  NLA_F_NESTED,
  NLA_F_NET_BYTEORDER,
  attrNested,
  decodeDest,
  decodeInfo,
  decodeService,
  encodeDelDest,
  encodeDelService,
  encodeGetDests,
  encodeGetService,
  encodeNewDest,
  encodeNewService,
  encodeSetDest,
  encodeSetService,
  indexAttrs,
  parseAttrs,
  type RealServer,
  type VirtualServer,
} from '../../src/kernel/ipvs/codec.ts';
import {
  IpvsClient,
  IpvsClientClosedError,
  IpvsRequestError,
  IpvsUnavailableError,
  RequestScheduler,
  netlinkErrorCode,
  type GenlTransport,
} from '../../src/kernel/ipvs/client.ts';

interface Golden {
  generator: string;
  constants: Record<string, number>;
  vectors: Record<string, { cmd: number; note: string; hex: string }>;
}

const golden = JSON.parse(
  readFileSync(new URL('../fixtures/ipvs/golden.json', import.meta.url), 'utf8'),
) as Golden;
/** The vectors were generated on a little-endian host; host-endian fields differ elsewhere. */
const le = endianness() === 'LE' ? test : test.skip;

function vec(name: string): Buffer {
  const v = golden.vectors[name];
  if (!v) throw new Error(`no golden vector ${name}`);
  return Buffer.from(v.hex, 'hex');
}

const rr: VirtualServer = { protocol: 'TCP', address: '10.96.0.10', port: 80, scheduler: 'rr' };
const sticky: VirtualServer = { ...rr, persistent: { timeoutSeconds: 10800 }, netmask: 0xffffff00 };
const udpWrr: VirtualServer = { protocol: 'UDP', address: '10.96.0.53', port: 53, scheduler: 'wrr' };
const sctpLc: VirtualServer = { protocol: 'SCTP', address: '10.96.1.1', port: 3868, scheduler: 'lc' };
const ep: RealServer = { address: '10.244.1.2', port: 8080, weight: 1, forwarding: 'masq' };

// ---------------------------------------------------------------------------
// Constants against <linux/ip_vs.h> (values printed by golden.c)
// ---------------------------------------------------------------------------

test('constants equal the kernel header values', (t) => {
  const groups: [string, Record<string, number>][] = [
    ['IPVS_CMD_ATTR_', IPVS_CMD_ATTR],
    ['IPVS_CMD_', IPVS_CMD],
    ['IPVS_SVC_ATTR_', IPVS_SVC_ATTR],
    ['IPVS_DEST_ATTR_', IPVS_DEST_ATTR],
    ['IPVS_STATS_ATTR_', IPVS_STATS_ATTR],
    ['IPVS_INFO_ATTR_', IPVS_INFO_ATTR],
    ['IP_VS_SVC_F_', IP_VS_SVC_F],
    ['IP_VS_CONN_F_', IP_VS_CONN_F],
  ];
  const singles: Record<string, number> = {
    IPVS_GENL_VERSION,
    IP_VS_VERSION_CODE,
    IP_VS_SCHEDNAME_MAXLEN,
    NLA_F_NESTED,
    NLA_F_NET_BYTEORDER,
  };
  let checked = 0;
  for (const [name, value] of Object.entries(golden.constants)) {
    if (name in singles) {
      t.is(singles[name], value, name);
      checked++;
      continue;
    }
    const group = groups.find(([prefix]) => name.startsWith(prefix));
    if (!group) continue; // e.g. IP_VS_PENAME_MAXLEN: not mirrored
    const key = name.slice(group[0].length);
    // IP_VS_CONN_F_LOCALNODE / DROUTE keep their header names in IP_VS_CONN_F.
    t.is(group[1][key], value, name);
    checked++;
  }
  t.true(checked >= 80, `checked ${checked} constants`);
});

// ---------------------------------------------------------------------------
// Golden vectors: requests built with libnl as ipvsadm's libipvs builds them
// ---------------------------------------------------------------------------

le('NEW_SERVICE TCP 10.96.0.10:80 rr matches libnl', (t) => {
  t.is(encodeNewService(rr).toString('hex'), vec('new_service_tcp_rr').toString('hex'));
});

le('NEW_SERVICE persistent 10800 s with a /24 netmask matches libnl', (t) => {
  t.is(encodeNewService(sticky).toString('hex'), vec('new_service_persistent').toString('hex'));
});

le('NEW_SERVICE SCTP and SET_SERVICE UDP wrr match libnl', (t) => {
  t.is(encodeNewService(sctpLc).toString('hex'), vec('new_service_sctp_lc').toString('hex'));
  t.is(encodeSetService(udpWrr).toString('hex'), vec('set_service_udp_wrr').toString('hex'));
});

le('DEL_SERVICE, GET_SERVICE and the GET_DEST dump filter carry the service key only', (t) => {
  t.is(encodeDelService(rr).toString('hex'), vec('del_service_tcp').toString('hex'));
  t.is(encodeGetDests(rr).toString('hex'), vec('get_dests_tcp').toString('hex'));
  t.is(encodeGetService(rr).toString('hex'), vec('get_dests_tcp').toString('hex'));
  // Extra fields of a full VirtualServer change nothing.
  t.is(encodeDelService(sticky).toString('hex'), vec('del_service_tcp').toString('hex'));
});

le('NEW_DEST 10.244.1.2:8080 weight 1 masq matches libnl', (t) => {
  t.is(encodeNewDest(rr, ep).toString('hex'), vec('new_dest_masq').toString('hex'));
  // Decoded-only counters are not encoded.
  t.is(encodeNewDest(rr, { ...ep, activeConns: 9, inactiveConns: 8, persistConns: 7 }).toString('hex'), vec('new_dest_masq').toString('hex'));
});

le('SET_DEST weight 0, and a route destination with thresholds, match libnl', (t) => {
  t.is(encodeSetDest(rr, { ...ep, weight: 0 }).toString('hex'), vec('set_dest_weight0').toString('hex'));
  const dr: RealServer = { address: '192.168.7.9', port: 65535, weight: 65535, forwarding: 'route', upperThreshold: 1000, lowerThreshold: 10 };
  t.is(encodeNewDest(udpWrr, dr).toString('hex'), vec('new_dest_route_thresholds').toString('hex'));
});

le('DEL_DEST matches libnl', (t) => {
  t.is(encodeDelDest(rr, ep).toString('hex'), vec('del_dest').toString('hex'));
  t.is(encodeDelDest(rr, { address: '10.244.1.2', port: 8080 }).toString('hex'), vec('del_dest').toString('hex'));
});

// IPv6, laid out by hand from <linux/ip_vs.h> and ip_vs_genl_parse_service /
// ip_vs_genl_parse_dest: AF_INET6 (10), the 16 address bytes, and the
// netmask of an IPv6 service as its prefix length, a host-endian u32
// (ip_vs_add_service: `(__force __u32) u->netmask`, 1-128).
const v6Service: VirtualServer = { protocol: 'TCP', address: 'fd00:10:96::a', port: 80, scheduler: 'rr' };
const v6Dest: RealServer = { address: 'fd00:10:244:1::2', port: 8080, weight: 1, forwarding: 'masq' };
/** The service key nest of v6Service: AF, PROTOCOL, ADDR, PORT. */
const V6_KEY =
  '06000100' + '0a000000' + // AF: AF_INET6
  '06000200' + '06000000' + // PROTOCOL: TCP
  '14000300' + 'fd00001000960000000000000000000a' + // ADDR fd00:10:96::a, 16 bytes
  '06000400' + '00500000'; // PORT 80, big-endian

le('NEW_SERVICE TCP [fd00:10:96::a]:80 rr: AF_INET6, 16 address bytes, netmask 128 host-endian', (t) => {
  const want =
    '54000180' + V6_KEY +
    '07000600' + '72720000' + // SCHED_NAME "rr"
    '0c000700' + '00000000' + 'ffffffff' + // FLAGS {0, mask ~0}
    '08000800' + '00000000' + // TIMEOUT 0
    '08000900' + '80000000'; // NETMASK: prefix length 128, u32 little-endian
  t.is(encodeNewService(v6Service).toString('hex'), want);
  // Persistence with a /64 granularity.
  const sticky6 = encodeNewService({ ...v6Service, persistent: { timeoutSeconds: 10800 }, netmask: 64 }).toString('hex');
  t.true(sticky6.endsWith('0c000700' + '01000000' + 'ffffffff' + '08000800' + '302a0000' + '08000900' + '40000000'), sticky6);
  t.is(encodeDelService(v6Service).toString('hex'), '30000180' + V6_KEY);
  t.is(encodeGetDests(v6Service).toString('hex'), '30000180' + V6_KEY);
});

le('NEW_DEST and DEL_DEST [fd00:10:96::a]:80 -> [fd00:10:244:1::2]:8080: ADDR_FAMILY AF_INET6', (t) => {
  const destKey =
    '06000b00' + '0a000000' + // ADDR_FAMILY: AF_INET6
    '14000100' + 'fd000010024400010000000000000002' + // ADDR fd00:10:244:1::2
    '06000200' + '1f900000'; // PORT 8080
  const want =
    '30000180' + V6_KEY +
    '48000280' + destKey +
    '08000300' + '00000000' + // FWD_METHOD masq
    '08000400' + '01000000' + // WEIGHT 1
    '08000500' + '00000000' + // U_THRESH
    '08000600' + '00000000'; // L_THRESH
  t.is(encodeNewDest(v6Service, v6Dest).toString('hex'), want);
  t.is(encodeDelDest(v6Service, v6Dest).toString('hex'), '30000180' + V6_KEY + '28000280' + destKey);
});

test('a destination without ADDR_FAMILY (Linux before 4.2) is of its virtual server\'s family', (t) => {
  const reply = asDestReply(encodeNewDest(v6Service, v6Dest), 1, 2, 3);
  const dest = parseAttrs(reply).find((a) => a.type === IPVS_CMD_ATTR.DEST)!;
  const attrs = attrNested(dest);
  t.true(attrs.some((a) => a.type === IPVS_DEST_ATTR.ADDR_FAMILY));
  const old = new AttrWriter()
    .nest(IPVS_CMD_ATTR.DEST, (w) => {
      for (const a of attrs) if (a.type !== IPVS_DEST_ATTR.ADDR_FAMILY) w.put(a.type, a.data);
    }, false)
    .toBuffer();
  const want = { ...v6Dest, upperThreshold: 0, lowerThreshold: 0, activeConns: 1, inactiveConns: 2, persistConns: 3 };
  t.deepEqual(decodeDest(old, AF_INET6), want);
  // Read as IPv4, the 16-byte address would be its first 4 bytes: fd00:10 as 253.0.0.16.
  t.is(decodeDest(old).address, '253.0.0.16');
  // An IPv4 destination without ADDR_FAMILY, of an IPv4 virtual server.
  const v4reply = asDestReply(encodeNewDest(rr, ep), 0, 0, 0);
  const v4attrs = attrNested(parseAttrs(v4reply).find((a) => a.type === IPVS_CMD_ATTR.DEST)!);
  const v4old = new AttrWriter().nest(IPVS_CMD_ATTR.DEST, (w) => {
    for (const a of v4attrs) if (a.type !== IPVS_DEST_ATTR.ADDR_FAMILY) w.put(a.type, a.data);
  }, false).toBuffer();
  t.is(decodeDest(v4old, AF_INET).address, ep.address);
});

test('IPv6 services and destinations round-trip; families never mix; addresses are canonical', (t) => {
  t.deepEqual(decodeService(encodeNewService(v6Service)), { ...v6Service, netmask: 128, flags: 0 });
  const sticky6: VirtualServer = { ...v6Service, address: '2001:db8::1', persistent: { timeoutSeconds: 60 }, netmask: 64 };
  t.deepEqual(decodeService(encodeNewService(sticky6)), { ...sticky6, flags: IP_VS_SVC_F.PERSISTENT });
  t.deepEqual(decodeDest(asDestReply(encodeNewDest(v6Service, v6Dest), 1, 2, 3)), { ...v6Dest, upperThreshold: 0, lowerThreshold: 0, activeConns: 1, inactiveConns: 2, persistConns: 3 });
  invalid(t, () => encodeNewDest(v6Service, ep), 'realServer.address', /not of the virtual server's address family/);
  invalid(t, () => encodeDelDest(rr, v6Dest), 'realServer.address', /not of the virtual server's address family/);
  invalid(t, () => encodeNewService({ ...v6Service, address: 'FD00:10:96::A' }), 'virtualServer.address', /not in canonical form \(fd00:10:96::a\)/);
  invalid(t, () => encodeNewService({ ...v6Service, address: '::' }), 'virtualServer.address', /:: is not a usable address/);
  invalid(t, () => encodeNewService({ ...v6Service, address: 'fd00::1%eth0' }), 'virtualServer.address', /is not an IPv6 address/);
  invalid(t, () => encodeNewService({ ...v6Service, netmask: 129 }), 'virtualServer.netmask', /129 is out of range 1-128/);
  invalid(t, () => encodeNewService({ ...v6Service, netmask: 0 }), 'virtualServer.netmask', /0 is out of range 1-128/);
});

le('FLUSH has no attributes', (t) => {
  t.is(vec('flush').length, 0);
});

test('encoders set NLA_F_NESTED on the command-level nests, as libnl 3.7 does', (t) => {
  const attrs = parseAttrs(encodeNewDest(rr, ep));
  t.deepEqual(attrs.map((a) => [a.type, a.nested]), [[IPVS_CMD_ATTR.SERVICE, true], [IPVS_CMD_ATTR.DEST, true]]);
  // The inner attributes are plain.
  t.true(attrNested(attrs[0]!).every((a) => !a.nested && !a.netByteOrder));
});

// ---------------------------------------------------------------------------
// Decoding kernel replies (built in golden.c after ip_vs_ctl.c's fill functions)
// ---------------------------------------------------------------------------

le('decodes a GET_SERVICE dump entry as the kernel sends it', (t) => {
  const s = decodeService(vec('reply_service'));
  t.deepEqual(s, {
    protocol: 'TCP',
    address: '10.96.0.10',
    port: 80,
    scheduler: 'rr',
    persistent: { timeoutSeconds: 10800 },
    netmask: 0xffffff00,
    flags: IP_VS_SVC_F.PERSISTENT | IP_VS_SVC_F.HASHED,
    stats: {
      conns: 7,
      inPkts: 120,
      outPkts: 98,
      inBytes: 0x1122334455,
      outBytes: 0x66778899aa,
      cps: 1,
      inPps: 2,
      outPps: 3,
      inBps: 4000,
      outBps: 5000,
    },
  });
  // The kernel's nests have no NLA_F_NESTED bit.
  t.false(parseAttrs(vec('reply_service'))[0]!.nested);
});

le('decodes a GET_DEST dump entry as the kernel sends it', (t) => {
  t.deepEqual(decodeDest(vec('reply_dest')), {
    address: '10.244.1.2',
    port: 8080,
    weight: 1,
    forwarding: 'masq',
    upperThreshold: 0,
    lowerThreshold: 0,
    activeConns: 3,
    inactiveConns: 2,
    persistConns: 1,
    stats: { conns: 5, inPkts: 60, outPkts: 40, inBytes: 2 ** 32, outBytes: 4096, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 0 },
  });
});

le('decodes the GET_INFO reply', (t) => {
  t.deepEqual(decodeInfo(vec('reply_info')), { versionCode: 0x010201, version: '1.2.1', connTabSize: 4096 });
});

le('falls back to the 32-bit STATS nest when STATS64 is absent', (t) => {
  // Rebuild the service reply without its STATS64 nest.
  const svc = indexAttrs(attrNested(parseAttrs(vec('reply_service'))[0]!));
  const w = new AttrWriter();
  w.nest(IPVS_CMD_ATTR.SERVICE, (inner) => {
    for (const [type, a] of svc) if (type !== IPVS_SVC_ATTR.STATS64) inner.put(type, a.data);
  }, false);
  const s = decodeService(w.toBuffer());
  t.is(s.stats?.inBytes, 0x1122334455);
  t.is(s.stats?.conns, 7);
});

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

test('encode -> decode round trip of services', (t) => {
  const cases: VirtualServer[] = [
    rr,
    sticky,
    udpWrr,
    sctpLc,
    { protocol: 'UDP', address: '255.255.255.254', port: 65535, scheduler: 'abcdefghijklmno', persistent: { timeoutSeconds: 2678400 }, netmask: 0 },
    { protocol: 'TCP', address: '1.2.3.4', port: 1, scheduler: 'sh', netmask: 0x80000000 },
  ];
  for (const vs of cases) {
    const got = decodeService(encodeNewService(vs));
    t.deepEqual(got, {
      ...vs,
      netmask: vs.netmask ?? 0xffffffff,
      flags: vs.persistent ? IP_VS_SVC_F.PERSISTENT : 0,
    });
  }
});

/** The kernel's GET_DEST entry carries the connection counters a request lacks: add them. */
function asDestReply(requestPayload: Buffer, active: number, inact: number, persist: number): Buffer {
  const dest = parseAttrs(requestPayload).find((a) => a.type === IPVS_CMD_ATTR.DEST)!;
  return new AttrWriter()
    .nest(IPVS_CMD_ATTR.DEST, (w) => {
      for (const a of attrNested(dest)) w.put(a.type, a.data);
      w.u32(IPVS_DEST_ATTR.ACTIVE_CONNS, active).u32(IPVS_DEST_ATTR.INACT_CONNS, inact).u32(IPVS_DEST_ATTR.PERSIST_CONNS, persist);
    }, false)
    .toBuffer();
}

test('encode -> decode round trip of destinations', (t) => {
  const cases: RealServer[] = [
    ep,
    { ...ep, weight: 0 },
    { address: '192.168.7.9', port: 65535, weight: 65535, forwarding: 'route', upperThreshold: 1000, lowerThreshold: 10 },
    { address: '172.16.0.1', port: 1, weight: 7, forwarding: 'tunnel', upperThreshold: 2147483647, lowerThreshold: 2147483647 },
    { address: '127.0.0.1', port: 22, weight: 3, forwarding: 'local' },
  ];
  for (const rs of cases) {
    for (const encode of [encodeNewDest, encodeSetDest]) {
      const got = decodeDest(asDestReply(encode(udpWrr, rs), 4, 5, 6));
      t.deepEqual(got, { upperThreshold: 0, lowerThreshold: 0, ...rs, activeConns: 4, inactiveConns: 5, persistConns: 6 });
    }
  }
});

// ---------------------------------------------------------------------------
// Validation: nothing unvalidated is encoded
// ---------------------------------------------------------------------------

function invalid(t: import('ava').ExecutionContext, fn: () => unknown, field: string, detail: RegExp): void {
  const err = t.throws(fn, { instanceOf: IpvsValidationError });
  t.is(err?.field, field);
  t.regex(err?.message ?? '', detail);
}

test('rejects bad virtual servers', (t) => {
  const bad = (patch: Record<string, unknown>) => ({ ...rr, ...patch }) as unknown as VirtualServer;
  invalid(t, () => encodeNewService(bad({ address: '10.96.0' })), 'virtualServer.address', /not a dotted-quad IPv4/);
  invalid(t, () => encodeNewService(bad({ address: '10.96.0.256' })), 'virtualServer.address', /octet above 255/);
  invalid(t, () => encodeNewService(bad({ address: '010.96.0.1' })), 'virtualServer.address', /dotted-quad/);
  invalid(t, () => encodeNewService(bad({ address: '0.0.0.0' })), 'virtualServer.address', /not a usable/);
  invalid(t, () => encodeNewService(bad({ address: 'fd00::1::2' })), 'virtualServer.address', /not an IPv6 address/);
  invalid(t, () => encodeNewService(bad({ address: ' 10.96.0.10' })), 'virtualServer.address', /dotted-quad/);
  invalid(t, () => encodeNewService(bad({ address: 167772170 })), 'virtualServer.address', /dotted-quad/);
  invalid(t, () => encodeNewService(bad({ port: 0 })), 'virtualServer.port', /0 is out of range 1-65535/);
  invalid(t, () => encodeNewService(bad({ port: 65536 })), 'virtualServer.port', /out of range/);
  invalid(t, () => encodeNewService(bad({ port: 80.5 })), 'virtualServer.port', /not an integer/);
  invalid(t, () => encodeNewService(bad({ port: '80' })), 'virtualServer.port', /not an integer/);
  invalid(t, () => encodeNewService(bad({ protocol: 'ICMP' })), 'virtualServer.protocol', /TCP, UDP, SCTP/);
  invalid(t, () => encodeNewService(bad({ protocol: 'tcp' })), 'virtualServer.protocol', /TCP, UDP, SCTP/);
  invalid(t, () => encodeNewService(bad({ scheduler: '' })), 'virtualServer.scheduler', /scheduler name/);
  invalid(t, () => encodeNewService(bad({ scheduler: 'RR' })), 'virtualServer.scheduler', /scheduler name/);
  invalid(t, () => encodeNewService(bad({ scheduler: 'round-robin' })), 'virtualServer.scheduler', /scheduler name/);
  invalid(t, () => encodeNewService(bad({ scheduler: 'rr\0' })), 'virtualServer.scheduler', /scheduler name/);
  invalid(t, () => encodeNewService(bad({ scheduler: 'a'.repeat(16) })), 'virtualServer.scheduler', /1-15/);
  invalid(t, () => encodeNewService(bad({ persistent: { timeoutSeconds: 0 } })), 'virtualServer.persistent.timeoutSeconds', /out of range 1-2678400/);
  invalid(t, () => encodeNewService(bad({ persistent: { timeoutSeconds: 2678401 } })), 'virtualServer.persistent.timeoutSeconds', /out of range/);
  invalid(t, () => encodeNewService(bad({ persistent: {} })), 'virtualServer.persistent.timeoutSeconds', /not an integer/);
  invalid(t, () => encodeNewService(bad({ persistent: null })), 'virtualServer.persistent', /missing/);
  invalid(t, () => encodeNewService(bad({ netmask: 0xff00ff00 })), 'virtualServer.netmask', /not a contiguous netmask/);
  invalid(t, () => encodeNewService(bad({ netmask: 2 ** 32 })), 'virtualServer.netmask', /out of range/);
  invalid(t, () => encodeNewService(bad({ netmask: -1 })), 'virtualServer.netmask', /out of range/);
  invalid(t, () => encodeNewService(undefined as unknown as VirtualServer), 'virtualServer', /missing/);
  // Key-only encoders validate the key too.
  invalid(t, () => encodeDelService(bad({ port: 0 })), 'virtualServer.port', /out of range/);
  invalid(t, () => encodeGetDests(bad({ address: 'x' })), 'virtualServer.address', /dotted-quad/);
  // But not the fields they do not send.
  t.notThrows(() => encodeDelService(bad({ scheduler: 'NOT VALID' })));
});

test('rejects bad real servers', (t) => {
  const bad = (patch: Record<string, unknown>) => ({ ...ep, ...patch }) as unknown as RealServer;
  invalid(t, () => encodeNewDest(rr, bad({ address: '10.244.1' })), 'realServer.address', /dotted-quad/);
  invalid(t, () => encodeNewDest(rr, bad({ port: 0 })), 'realServer.port', /out of range 1-65535/);
  invalid(t, () => encodeNewDest(rr, bad({ weight: -1 })), 'realServer.weight', /out of range 0-65535/);
  invalid(t, () => encodeNewDest(rr, bad({ weight: 65536 })), 'realServer.weight', /out of range 0-65535/);
  invalid(t, () => encodeSetDest(rr, bad({ weight: 1.5 })), 'realServer.weight', /not an integer/);
  invalid(t, () => encodeNewDest(rr, bad({ forwarding: 'nat' })), 'realServer.forwarding', /masq, local, tunnel, route/);
  invalid(t, () => encodeNewDest(rr, bad({ forwarding: 'toString' })), 'realServer.forwarding', /masq/);
  invalid(t, () => encodeNewDest(rr, bad({ upperThreshold: 2 ** 31 })), 'realServer.upperThreshold', /out of range 0-2147483647/);
  invalid(t, () => encodeNewDest(rr, bad({ lowerThreshold: 5 })), 'realServer.lowerThreshold', /5 is above upperThreshold 0/);
  invalid(t, () => encodeNewDest(rr, bad({ upperThreshold: 10, lowerThreshold: 11 })), 'realServer.lowerThreshold', /above upperThreshold 10/);
  invalid(t, () => encodeNewDest({ ...rr, protocol: 'ICMP' } as unknown as VirtualServer, ep), 'virtualServer.protocol', /TCP/);
  invalid(t, () => encodeDelDest(rr, bad({ port: 70000 })), 'realServer.port', /out of range/);
  t.notThrows(() => encodeDelDest(rr, bad({ weight: -5, forwarding: 'x' })));
});

// ---------------------------------------------------------------------------
// TLV reader / writer and decoder edge cases
// ---------------------------------------------------------------------------

test('AttrWriter: nla_len excludes the padding, a nest includes its inner padding', (t) => {
  const b = new AttrWriter().string(6, 'rr').u8(13, 1).toBuffer();
  t.is(b.toString('hex'), '07000600727200000500' + '0d00' + '01000000');
  const n = new AttrWriter().nest(1, (w) => w.string(6, 'rr')).toBuffer();
  t.is(n.toString('hex'), '0c000180' + '0700060072720000');
  t.throws(() => new AttrWriter().put(1, Buffer.alloc(65532)), { instanceOf: RangeError });
  t.throws(() => new AttrWriter().u16(1, 65536), { instanceOf: RangeError });
  t.throws(() => new AttrWriter().string(1, 'é'), { instanceOf: RangeError });
});

test('parseAttrs: strict lengths, tolerant of a missing final pad, last duplicate wins', (t) => {
  t.throws(() => parseAttrs(Buffer.from('03000100', 'hex')), { instanceOf: NetlinkDecodeError, message: /nla_len 3/ });
  t.throws(() => parseAttrs(Buffer.from('0900010000000000', 'hex')), { instanceOf: NetlinkDecodeError, message: /nla_len 9/ });
  const unpadded = Buffer.from('0500010007', 'hex');
  t.deepEqual(parseAttrs(unpadded).map((a) => [a.type, a.data.toString('hex')]), [[1, '07']]);
  const twice = new AttrWriter().u32(2, 1).u32(2, 9).toBuffer();
  t.is(indexAttrs(parseAttrs(twice)).get(2)?.data.readUInt32LE(0), endianness() === 'LE' ? 9 : 0x09000000);
  t.deepEqual(parseAttrs(Buffer.alloc(0)), []);
  t.deepEqual(parseAttrs(Buffer.from('0000', 'hex')), []); // < 4 trailing bytes ignored
});

test('decoders: missing attributes, bad sizes, unsupported entries', (t) => {
  t.throws(() => decodeService(Buffer.alloc(0)), { instanceOf: IpvsDecodeError, message: /no IPVS_CMD_ATTR_SERVICE/ });
  t.throws(() => decodeDest(encodeNewService(rr)), { instanceOf: IpvsDecodeError, message: /no IPVS_CMD_ATTR_DEST/ });
  // A key-only service nest lacks SCHED_NAME.
  t.throws(() => decodeService(encodeDelService(rr)), { instanceOf: IpvsDecodeError, message: /missing IPVS_SVC_ATTR_SCHED_NAME/ });
  // A request's dest nest lacks the connection counters.
  t.throws(() => decodeDest(encodeNewDest(rr, ep)), { instanceOf: IpvsDecodeError, message: /missing IPVS_DEST_ATTR_ACTIVE_CONNS/ });
  t.throws(() => decodeInfo(new AttrWriter().u32(IPVS_INFO_ATTR.VERSION, 1).toBuffer()), { instanceOf: IpvsDecodeError, message: /CONN_TAB_SIZE/ });
  t.throws(() => decodeInfo(new AttrWriter().u16(IPVS_INFO_ATTR.VERSION, 1).u32(2, 1).toBuffer()), { instanceOf: IpvsDecodeError, message: /expected 4 bytes, got 2/ });

  const fwmark = new AttrWriter()
    .nest(IPVS_CMD_ATTR.SERVICE, (w) => {
      w.u16(IPVS_SVC_ATTR.AF, 2).u32(IPVS_SVC_ATTR.FWMARK, 0x4000).string(IPVS_SVC_ATTR.SCHED_NAME, 'rr');
    }, false)
    .toBuffer();
  t.throws(() => decodeService(fwmark), { instanceOf: IpvsUnsupportedError, message: /firewall-mark service 16384/ });
  // AF_APPLETALK (5): neither IPv4 nor IPv6.
  const otherAf = new AttrWriter().nest(IPVS_CMD_ATTR.SERVICE, (w) => w.u16(IPVS_SVC_ATTR.AF, 5), false).toBuffer();
  t.throws(() => decodeService(otherAf), { instanceOf: IpvsUnsupportedError, message: /address family 5/ });
  const v4 = Buffer.from([10, 0, 0, 1, ...new Array<number>(12).fill(0)]);
  const icmp = new AttrWriter()
    .nest(IPVS_CMD_ATTR.SERVICE, (w) => {
      w.u16(IPVS_SVC_ATTR.AF, 2).u16(IPVS_SVC_ATTR.PROTOCOL, 1).put(IPVS_SVC_ATTR.ADDR, v4).be16(IPVS_SVC_ATTR.PORT, 0);
    }, false)
    .toBuffer();
  t.throws(() => decodeService(icmp), { instanceOf: IpvsUnsupportedError, message: /10.0.0.1:0 has unsupported protocol 1/ });
  const destOtherAf = new AttrWriter().nest(IPVS_CMD_ATTR.DEST, (w) => w.u16(IPVS_DEST_ATTR.ADDR_FAMILY, 5), false).toBuffer();
  t.throws(() => decodeDest(destOtherAf), { instanceOf: IpvsUnsupportedError, message: /address family 5/ });
  // An IPv6 address needs all 16 bytes.
  const shortV6 = new AttrWriter()
    .nest(IPVS_CMD_ATTR.SERVICE, (w) => {
      w.u16(IPVS_SVC_ATTR.AF, AF_INET6).u16(IPVS_SVC_ATTR.PROTOCOL, 6).put(IPVS_SVC_ATTR.ADDR, Buffer.alloc(8, 0xfd)).be16(IPVS_SVC_ATTR.PORT, 80);
    }, false)
    .toBuffer();
  t.throws(() => decodeService(shortV6), { instanceOf: IpvsDecodeError, message: /16-byte nf_inet_addr, got 8 bytes/ });
  const bypass = new AttrWriter()
    .nest(IPVS_CMD_ATTR.DEST, (w) => {
      w.put(IPVS_DEST_ATTR.ADDR, v4).be16(IPVS_DEST_ATTR.PORT, 80).u32(IPVS_DEST_ATTR.FWD_METHOD, IP_VS_CONN_F.BYPASS);
    }, false)
    .toBuffer();
  t.throws(() => decodeDest(bypass), { instanceOf: IpvsUnsupportedError, message: /forwarding method 4/ });
  const shortAddr = new AttrWriter().nest(IPVS_CMD_ATTR.DEST, (w) => w.put(IPVS_DEST_ATTR.ADDR, Buffer.from([10, 0])), false).toBuffer();
  t.throws(() => decodeDest(shortAddr), { instanceOf: IpvsDecodeError, message: /16-byte nf_inet_addr, got 2 bytes/ });
});

test('stats: PAD and unknown attributes are skipped, u32 and u64 counters both read', (t) => {
  const reply = new AttrWriter()
    .nest(IPVS_CMD_ATTR.DEST, (w) => {
      w.put(IPVS_DEST_ATTR.ADDR, Buffer.from([10, 0, 0, 1, ...new Array<number>(12).fill(0)]))
        .be16(IPVS_DEST_ATTR.PORT, 443)
        .u32(IPVS_DEST_ATTR.FWD_METHOD, IP_VS_CONN_F.DROUTE)
        .u32(IPVS_DEST_ATTR.WEIGHT, 2)
        .u32(IPVS_DEST_ATTR.U_THRESH, 0)
        .u32(IPVS_DEST_ATTR.L_THRESH, 0)
        .u32(IPVS_DEST_ATTR.ACTIVE_CONNS, 0)
        .u32(IPVS_DEST_ATTR.INACT_CONNS, 0)
        .u32(IPVS_DEST_ATTR.PERSIST_CONNS, 0)
        .u32(999, 1) // an attribute from a future kernel
        .nest(IPVS_DEST_ATTR.STATS64, (s) => {
          s.put(IPVS_STATS_ATTR.PAD, Buffer.alloc(0))
            .u64(IPVS_STATS_ATTR.CONNS, 3n)
            .put(IPVS_STATS_ATTR.PAD, Buffer.alloc(0))
            .u64(IPVS_STATS_ATTR.INBYTES, 2n ** 40n)
            .u32(IPVS_STATS_ATTR.OUTBPS, 77);
        }, false);
    }, false)
    .toBuffer();
  const d = decodeDest(reply);
  t.is(d.forwarding, 'route');
  t.is(d.port, 443);
  t.deepEqual(d.stats, { conns: 3, inPkts: 0, outPkts: 0, inBytes: 2 ** 40, outBytes: 0, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 77 });
});

// ---------------------------------------------------------------------------
// netlink.ts
// ---------------------------------------------------------------------------

test('IpvsClient.open on a kernel without IPVS fails with IpvsUnavailableError', async (t) => {
  let client: IpvsClient | undefined;
  try {
    client = await IpvsClient.open();
  } catch (err) {
    t.true(err instanceof IpvsUnavailableError, String(err));
    t.is((err as Error).message, 'IPVS is not available in this kernel (generic netlink family IPVS not found)');
    return;
  }
  // A kernel with IPVS: resolving worked; nothing else is touched here.
  t.log(`IPVS family ${client.familyId} present; SO_RCVBUF ${client.recvBufferBytes}`);
  client.close();
  t.pass();
});

test('netlinkErrorCode reads the package\'s "Request rejected" errors', (t) => {
  t.is(netlinkErrorCode(new Error('Request rejected: ENOENT')), 'ENOENT');
  t.is(netlinkErrorCode(new Error('Request rejected: -523')), 'E?523');
  t.is(netlinkErrorCode(new Error('Timeout has been reached')), undefined);
  t.is(netlinkErrorCode('Request rejected: ENOENT'), undefined);
});

interface FakeCall {
  readonly family: number;
  readonly cmd: number;
  readonly payload: Buffer;
  readonly dump: boolean;
  resolve(v: Buffer[]): void;
  reject(e: Error): void;
}

/** A GenlTransport whose requests stay open until the test settles them. */
function fakeTransport(resolve: (name: string) => Promise<number> = async () => 0x22) {
  const calls: FakeCall[] = [];
  const open = new Set<FakeCall>();
  const state = { closed: false, maxInFlight: 0, dumpOverlaps: 0, errorHandler: undefined as ((e: Error) => void) | undefined };
  const transport: GenlTransport = {
    resolveFamily: resolve,
    request(family, cmd, payload, opts) {
      // A dump must start alone, and nothing may start while a dump is open.
      if (opts.dump ? open.size > 0 : [...open].some((c) => c.dump)) state.dumpOverlaps++;
      return new Promise<Buffer[]>((res, rej) => {
        const call: FakeCall = {
          family,
          cmd,
          payload,
          dump: opts.dump,
          resolve: (v) => {
            open.delete(call);
            res(v);
          },
          reject: (e) => {
            open.delete(call);
            rej(e);
          },
        };
        calls.push(call);
        open.add(call);
        state.maxInFlight = Math.max(state.maxInFlight, open.size);
      });
    },
    onError(h) {
      state.errorHandler = h;
    },
    recvBufferBytes: () => 8 << 20,
    close() {
      state.closed = true;
    },
  };
  return { transport, calls, open, state };
}

const tick = () => new Promise((r) => setImmediate(r));

test('IpvsClient maps ENOENT on family resolution, and closes the socket', async (t) => {
  const f = fakeTransport(async () => {
    throw new Error('Request rejected: ENOENT');
  });
  await t.throwsAsync(IpvsClient.withTransport(f.transport), { instanceOf: IpvsUnavailableError });
  t.true(f.state.closed);
  const g = fakeTransport(async () => {
    throw new Error('Request rejected: EPERM');
  });
  await t.throwsAsync(IpvsClient.withTransport(g.transport), { message: 'Request rejected: EPERM' });
  t.true(g.state.closed);
});

test('IpvsClient sends the codec payloads and maps kernel errors to IpvsRequestError', async (t) => {
  const f = fakeTransport();
  const client = await IpvsClient.withTransport(f.transport);
  const p1 = client.newService(rr);
  const p2 = client.newDest(rr, ep);
  await tick();
  t.deepEqual(f.calls.map((c) => [c.family, c.cmd, c.dump]), [[0x22, IPVS_CMD.NEW_SERVICE, false], [0x22, IPVS_CMD.NEW_DEST, false]]);
  t.true(f.calls[0]!.payload.equals(encodeNewService(rr)));
  t.true(f.calls[1]!.payload.equals(encodeNewDest(rr, ep)));
  f.calls[0]!.resolve([]);
  f.calls[1]!.reject(new Error('Request rejected: ESRCH'));
  await p1;
  const err = await t.throwsAsync(p2, { instanceOf: IpvsRequestError });
  t.is(err?.code, 'ESRCH');
  t.is(err?.errno, 3);
  t.is(err?.command, 'NEW_DEST');
  t.is(err?.message, 'IPVS NEW_DEST failed: ESRCH (service not defined)');
  // Validation happens before anything is sent.
  await t.throwsAsync(client.newDest(rr, { ...ep, weight: 70000 }), { instanceOf: IpvsValidationError });
  t.is(f.calls.length, 2);
  client.close();
});

test('IpvsClient keeps at most maxInFlight requests outstanding, and runs dumps alone', async (t) => {
  const f = fakeTransport();
  const client = await IpvsClient.withTransport(f.transport, { maxInFlight: 64 });
  const writes = Array.from({ length: 200 }, (_, i) => client.newDest(rr, { ...ep, port: 1000 + i }));
  const dump = client.dumpServices();
  const later = client.flush();
  await tick();
  t.is(f.calls.length, 64);
  // Complete the oldest open request, one at a time, as replies would arrive.
  for (let i = 0; i < 300 && f.open.size > 0; i++) {
    const c = f.open.values().next().value!;
    c.resolve(c.dump ? [vec('reply_service')] : []);
    await tick();
  }
  await Promise.all(writes);
  const services = await dump;
  await later;
  t.is(f.state.maxInFlight, 64);
  t.is(f.state.dumpOverlaps, 0);
  t.is(f.calls.length, 202);
  // FIFO: the dump ran after the 200 writes and before the flush.
  t.is(f.calls[200]!.cmd, IPVS_CMD.GET_SERVICE);
  t.true(f.calls[200]!.dump);
  t.is(f.calls[201]!.cmd, IPVS_CMD.FLUSH);
  t.is(services.entries.length, 1);
  t.is(services.entries[0]!.address, '10.96.0.10');
  client.close();
});

test('IpvsClient lists unsupported dump entries instead of failing', async (t) => {
  const f = fakeTransport();
  const client = await IpvsClient.withTransport(f.transport);
  const fwmark = new AttrWriter()
    .nest(IPVS_CMD_ATTR.SERVICE, (w) => w.u16(IPVS_SVC_ATTR.AF, 2).u32(IPVS_SVC_ATTR.FWMARK, 7), false)
    .toBuffer();
  const p = client.dumpServices();
  await tick();
  f.calls[0]!.resolve([vec('reply_service'), fwmark]);
  const r = await p;
  t.is(r.entries.length, 1);
  t.deepEqual(r.unsupported, ['IPVS reply: firewall-mark service 7 (af 2) is not supported']);
  client.close();
});

test('a timeout or a socket error closes the client', async (t) => {
  const f = fakeTransport();
  const client = await IpvsClient.withTransport(f.transport);
  const p = client.delService(rr);
  const q = client.delService(sctpLc);
  await tick();
  f.calls[0]!.reject(new Error('Timeout has been reached'));
  await t.throwsAsync(p, { instanceOf: IpvsClientClosedError, message: /DEL_SERVICE: Timeout has been reached/ });
  await t.throwsAsync(q, { instanceOf: IpvsClientClosedError });
  t.true(f.state.closed);
  await t.throwsAsync(client.flush(), { instanceOf: IpvsClientClosedError });

  const g = fakeTransport();
  const c2 = await IpvsClient.withTransport(g.transport);
  const r = c2.getInfo();
  await tick();
  g.state.errorHandler?.(new Error('recvmsg failed: ENOBUFS'));
  await t.throwsAsync(r, { instanceOf: IpvsClientClosedError, message: /socket error: recvmsg failed: ENOBUFS/ });
  t.true(g.state.closed);
});

test('RequestScheduler: an exclusive task waits for running ones and blocks later ones', async (t) => {
  const s = new RequestScheduler(2);
  const log: string[] = [];
  const gate = () => {
    let open!: () => void;
    const p = new Promise<void>((r) => (open = r));
    return { p, open };
  };
  const a = gate();
  const b = gate();
  const x = gate();
  const c = gate();
  const run = (name: string, exclusive: boolean, g: { p: Promise<void> }) =>
    s.run(exclusive, async () => {
      log.push(`start ${name}`);
      await g.p;
      log.push(`end ${name}`);
    });
  const all = [run('a', false, a), run('b', false, b), run('x', true, x), run('c', false, c)];
  await tick();
  t.deepEqual(log, ['start a', 'start b']);
  a.open();
  await tick();
  t.deepEqual(log, ['start a', 'start b', 'end a']);
  b.open();
  await tick();
  t.deepEqual(log.slice(3), ['end b', 'start x']);
  x.open();
  await tick();
  t.deepEqual(log.slice(5), ['end x', 'start c']);
  c.open();
  await Promise.all(all);
  t.is(s.inFlight, 0);
  t.throws(() => new RequestScheduler(0), { instanceOf: RangeError });
});
