/**
 * Hostile input (property-based): names, namespaces, port names, labels,
 * annotations, endpoint fields, IP and protocol strings carrying newlines,
 * quotes, spaces, `--`, shell characters or non-ASCII text go through the
 * file source's decoding (Decoder: parse.ts, normalise.ts), every mode's
 * `render`, an iptables-mode and an IPVS-mode sync on the in-memory kernel,
 * the IPVS netlink encoders and conntrack's argument vector. For every
 * generated manifest set:
 *
 * - an object with a hostile value in a field drover reads is skipped with a
 *   one-line ManifestError naming its file, kind and that field; one with a
 *   hostile apiVersion, kind or addressType is ignored; a hostile value in a
 *   field drover does not read changes nothing; a bad endpoint address drops
 *   that endpoint only; nothing throws;
 * - every port of every valid Service is in the snapshot with exactly its
 *   valid endpoints, and is rendered in every mode and programmed by both
 *   backends;
 * - every line written (restore payloads, render output, the fakes' netlink,
 *   address and sysctl logs) is printable ASCII without any hostile string,
 *   with quotes only around comments naming validated service ports; netlink
 *   messages decode to the model's values; conntrack arguments are flags,
 *   IPv4 addresses and ports.
 *
 * Set FC_SEED to replay a failure (fast-check prints the seed and path).
 */
import test from 'ava';
import fc from 'fast-check';
import { serviceSummary } from '../../src/cli/render.ts';
import { conntrackDeleteArgs } from '../../src/conntrack/exec.ts';
import { staleUDPFlows } from '../../src/conntrack/stale.ts';
import { ipFromBytes, isCanonicalIPv4 } from '../../src/model/addr.ts';
import { ManifestError } from '../../src/model/errors.ts';
import { servicePortKey } from '../../src/model/normalise.ts';
import type { ParseResult } from '../../src/model/parse.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import { hasNonPrintable } from '../../src/model/quote.ts';
import { formatPath } from '../../src/model/schema.ts';
import { EMPTY_SNAPSHOT, type Snapshot } from '../../src/model/types.ts';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/modes/iptables/fake.ts';
import { desiredIpvsState } from '../../src/modes/ipvs/assemble.ts';
import {
  attrBe16,
  attrNested,
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
  IPVS_CMD_ATTR,
  IPVS_DEST_ATTR,
  parseAttrs,
} from '../../src/modes/ipvs/codec.ts';
import { DUMMY_INTERFACE } from '../../src/modes/ipvs/link.ts';
import { allModes, modeDriver } from '../../src/modes/registry.ts';
import { renderConfig } from '../../src/modes/shared/render-config.ts';
import { Decoder } from '../../src/sources/decoder.ts';
import { silentLogger } from '../../src/util/log.ts';
import { fate, MARKER, worldArb, type GenObject, type GenService, type GenWorld } from '../support/hostile.ts';
import { World } from '../support/ipvs-world.ts';
import { commentsOf, nftCommentsOf, nftLineProblem, payloadProblems } from '../support/payload-lines.ts';

const SERVICE_CIDR = '10.96.0.0/12';
/** `render`'s options; the cluster CIDR is the one of the IPVS fakes (ipvs-world.ts). */
const OPTS = { source: 'hostile', masqueradeAll: false, clusterCidr: '10.244.0.0/16', serviceCidr: SERVICE_CIDR };
const SEED = Number(process.env.FC_SEED ?? 20261201);
const RUNS = 200;

/** The comments of each mode's static rules: what `render` writes for an empty snapshot. */
/** The comments of nftables mode's layout, from its render of an empty snapshot. */
const NFT_STATIC_COMMENTS = nftCommentsOf((await modeDriver('nftables').render(EMPTY_SNAPSHOT, OPTS, [])).text);
const STATIC_COMMENTS = new Set((await Promise.all(allModes().map(async (m) => [...commentsOf((await m.render(EMPTY_SNAPSHOT, OPTS, [])).text)]))).flat());

/** A valid service port as the generator made it, with the endpoints drover must serve ("ip:port"). */
interface ExpectedPort {
  readonly key: string;
  readonly clusterIP: string | undefined;
  readonly port: number;
  readonly protocol: string;
  readonly endpoints: readonly string[];
}

/** The service ports the valid Services of `world` must have. */
function expectedPorts(world: GenWorld): ExpectedPort[] {
  return world.services.flatMap((s) => (fate(s.service.poisons) === 'ok' ? s.ports.map((p, i) => expectedPort(s, i, p)) : []));
}

function expectedPort(s: GenService, i: number, p: GenService['ports'][number]): ExpectedPort {
  const fromObject = s.endpoints === undefined || fate(s.endpoints.poisons) === 'ok';
  // A Shepherd Service's first status.endpoints entry is its first port's; an endpoint object's first address serves every port.
  const dropped = s.dropFirst && (s.endpoints !== undefined || i === 0);
  const addresses = fromObject ? s.addresses.filter((_, j) => !(dropped && j === 0)) : [];
  return {
    key: servicePortKey(s.namespace, s.name, p.name),
    clusterIP: s.clusterIP,
    port: p.port,
    protocol: p.protocol,
    endpoints: addresses.map((a) => `${a.ip}:${p.targetPort}`).sort(),
  };
}

/** The file source's path for one manifest set: parse every object, one group per file, rebuild. */
function decode(decoder: Decoder, world: GenWorld) {
  const results = new Map<GenObject, { file: string; result: ParseResult }>();
  const upsert: Array<[string, ParsedObject[]]> = [];
  for (const { file, objects } of world.files) {
    const served: ParsedObject[] = [];
    objects.forEach((o, index) => {
      const result = decoder.parse({ file, index, raw: o.raw });
      results.set(o, { file, result });
      if (result.status === 'ok') served.push(result.object);
    });
    upsert.push([file, served]);
  }
  return { results, built: decoder.apply({ upsert, remove: [] }) };
}

/** Problems of the parse results against what each object's poisons call for. */
function parseProblems(results: ReadonlyMap<GenObject, { file: string; result: ParseResult }>): string[] {
  const out: string[] = [];
  for (const [o, { file, result: r }] of results) {
    const want = fate(o.poisons);
    const got = r.status === 'error' ? 'reject' : r.status === 'ignored' ? 'ignore' : 'ok';
    const what = `${o.kind} poisoned at ${JSON.stringify(o.poisons)}`;
    if (got !== want) {
      out.push(`${what}: expected ${want}, got ${JSON.stringify(r.status === 'error' ? r.error.message : r.status === 'ignored' ? r.reason : 'ok')}`);
      continue;
    }
    const messages = r.status === 'ok' ? r.warnings : r.status === 'error' ? [r.error] : [];
    for (const e of messages) {
      if (!(e instanceof ManifestError)) out.push(`${what}: not a ManifestError`);
      else if (/[\r\n\u2028\u2029]/.test(e.message) || hasNonPrintable(e.message) || hasNonPrintable(e.object)) out.push(`${what}: message not one printable line: ${JSON.stringify(e.message)}`);
      else if (e.file !== file || e.kind !== o.kind) out.push(`${what}: error names ${JSON.stringify([e.file, e.kind])}`);
    }
    if (r.status === 'error') {
      const fields = o.poisons.filter((p) => p.effect === 'reject').map((p) => formatPath(p.path));
      if (!fields.includes(r.error.field)) out.push(`${what}: error names field ${JSON.stringify(r.error.field)}, not one of ${JSON.stringify(fields)}`);
      const named = !o.poisons.some((p) => p.path[0] === 'metadata' && (p.path[1] === 'name' || p.path[1] === 'namespace'));
      const clean = o.clean.metadata as { name: string; namespace?: string };
      const object = o.kind === 'Node' ? clean.name : `${clean.namespace}/${clean.name}`;
      if (named && r.error.object !== object) out.push(`${what}: error names object ${JSON.stringify(r.error.object)}, not ${object}`);
    }
  }
  return out;
}

/** Problems of the snapshot against the valid service ports: each there with its endpoints, and nothing else. */
function snapshotProblems(snapshot: Snapshot, expected: readonly ExpectedPort[]): string[] {
  const out: string[] = [];
  for (const e of expected) {
    const sp = snapshot.services.get(e.key);
    if (!sp) {
      out.push(`valid service port ${e.key} is missing`);
      continue;
    }
    const endpoints = sp.endpoints.map((x) => `${x.ip}:${x.port}`).sort();
    if ((e.clusterIP !== undefined && sp.clusterIP !== e.clusterIP) || sp.port !== e.port || sp.protocol !== e.protocol) {
      out.push(`${e.key}: ${sp.clusterIP}:${sp.port}/${sp.protocol}, expected ${e.clusterIP ?? 'allocated'}:${e.port}/${e.protocol}`);
    }
    if (JSON.stringify(endpoints) !== JSON.stringify(e.endpoints)) out.push(`${e.key}: endpoints ${endpoints.join(' ')}, expected ${e.endpoints.join(' ')}`);
  }
  if (snapshot.services.size !== expected.length) out.push(`snapshot has ${snapshot.services.size} service ports, expected ${expected.length}`);
  return out;
}

/** Problems of each mode's `render`: its lines, and each valid service port in it. */
async function renderProblems(snapshot: Snapshot, keys: ReadonlySet<string>): Promise<string[]> {
  const out: string[] = [];
  for (const mode of allModes()) {
    const r = await mode.render(snapshot, OPTS, serviceSummary(snapshot));
    const problems =
      mode.name === 'nftables'
        ? r.text.split('\n').flatMap((line) => {
            const p = nftLineProblem(line, NFT_STATIC_COMMENTS);
            return p === undefined ? [] : [`${p}: ${JSON.stringify(line)}`];
          })
        : payloadProblems([r.text], keys, STATIC_COMMENTS);
    out.push(...problems.map((p) => `${mode.name} render: ${p}`));
    out.push(...r.leftOut.map((l) => `${mode.name} render left out: ${l}`));
    for (const sp of snapshot.services.values()) {
      const eps = sp.endpoints.map((e) => `${e.ip}:${e.port}`);
      const wanted =
        mode.name === 'iptables'
          ? eps.length > 0
            ? [`--comment "${sp.key} cluster IP"`, ...eps.map((ep) => `--to-destination ${ep}`)]
            : [`--comment "${sp.key} has no endpoints"`]
          : mode.name === 'ipvs'
            ? [`add KUBE-CLUSTER-IP ${sp.clusterIP},${sp.protocol.toLowerCase()}:${sp.port}`, ` ${sp.clusterIP}:${sp.port} -s rr`, ...eps.map((ep) => `${sp.clusterIP}:${sp.port} -r ${ep} `)]
            : mode.name === 'nftables'
              ? [`${sp.clusterIP} . ${sp.protocol.toLowerCase()} . ${sp.port}`, ...sp.endpoints.map((e) => `${e.ip} . ${e.port}`)]
              : [];
      for (const w of wanted) if (!r.text.includes(w)) out.push(`${mode.name} render lacks ${JSON.stringify(w)} of ${sp.key}`);
    }
  }
  return out;
}

/** The destination "ip:port" of a NEW_DEST payload, read from its DEST nest. */
function destOf(payload: Buffer): string {
  const dest = indexAttrs(attrNested(indexAttrs(parseAttrs(payload)).get(IPVS_CMD_ATTR.DEST)!));
  const addr = ipFromBytes(dest.get(IPVS_DEST_ATTR.ADDR)!.data.subarray(0, 4)).text;
  return `${addr}:${attrBe16(dest.get(IPVS_DEST_ATTR.PORT)!, 'port')}`;
}

/** Problems of the netlink messages of `snapshot`'s virtual and real servers: no hostile byte, and they decode to the model's values. */
function netlinkProblems(snapshot: Snapshot): string[] {
  const out: string[] = [];
  const marker = Buffer.from(MARKER);
  for (const { vs, reals } of desiredIpvsState(snapshot, { scheduler: 'rr' }).virtualServers.values()) {
    const messages = [encodeNewService(vs), encodeSetService(vs), encodeDelService(vs), encodeGetService(vs), encodeGetDests(vs)];
    const back = decodeService(messages[0]!);
    if (back.address !== vs.address || back.port !== vs.port || back.protocol !== vs.protocol || back.scheduler !== 'rr') {
      out.push(`NEW_SERVICE decodes to ${JSON.stringify(back)}, not ${JSON.stringify(vs)}`);
    }
    for (const rs of reals.values()) {
      const dest = encodeNewDest(vs, rs);
      messages.push(dest, encodeSetDest(vs, rs), encodeDelDest(vs, rs));
      const d = destOf(dest);
      if (d !== `${rs.address}:${rs.port}`) out.push(`NEW_DEST carries ${d}, not ${rs.address}:${rs.port}`);
    }
    if (messages.some((m) => m.includes(marker))) out.push(`a netlink message of ${vs.address}:${vs.port} holds a hostile string`);
  }
  return out;
}

/** Problems of conntrack's argument vectors for the stale flows between two snapshots: only flags, IPv4 addresses and ports. */
function conntrackProblems(before: Snapshot, after: Snapshot, changed: ReadonlySet<string> | undefined): string[] {
  const flags = new Set(['-D', '-p', 'udp', '--orig-dst', '--orig-port-dst', '--dst-nat']);
  const flows = [...staleUDPFlows(before, after), ...staleUDPFlows(before, after, changed)];
  return flows.flatMap((f) =>
    conntrackDeleteArgs(f)
      .filter((a) => !flags.has(a) && !isCanonicalIPv4(a) && !/^[1-9][0-9]{0,4}$/.test(a))
      .map((a) => `conntrack argument ${JSON.stringify(a)}`),
  );
}

/** Problems of an iptables-mode sync of `a` (full) then `b` (partial), on FakeIptables. */
async function iptablesSyncProblems(a: Snapshot, b: Snapshot, changed: ReadonlySet<string>, keys: ReadonlySet<string>): Promise<string[]> {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render: renderConfig(OPTS), logger: silentLogger() });
  await backend.sync(a, { full: true, changed: new Set() });
  await backend.sync(b, { full: false, changed });
  const out = payloadProblems(fake.restores, keys, STATIC_COMMENTS).map((p) => `iptables-restore: ${p}`);
  const tables = fake.dump('nat') + fake.dump('filter');
  for (const sp of b.services.values()) {
    const comment = `"${sp.key} ${sp.endpoints.length > 0 ? 'cluster IP' : 'has no endpoints'}"`;
    if (!tables.includes(comment)) out.push(`iptables mode did not program ${sp.key}`);
  }
  return out;
}

/** Problems of an IPVS-mode sync of `a` (full) then `b` (partial), on the IPVS fakes. */
async function ipvsSyncProblems(a: Snapshot, b: Snapshot, changed: ReadonlySet<string>, keys: ReadonlySet<string>): Promise<string[]> {
  const w = new World();
  const backend = w.backend();
  await backend.sync(a, { full: true, changed: new Set() });
  await backend.sync(b, { full: false, changed });
  const logs = [...w.iptables.restores, ...w.ipset.restores, w.ipvs.log.join('\n'), w.links.log.join('\n'), w.sysctls.writes.join('\n')];
  const out = payloadProblems(logs, keys, STATIC_COMMENTS).map((p) => `IPVS mode: ${p}`);
  const list = w.ipvs.list();
  const bound = new Set(w.links.addressesOf(DUMMY_INTERFACE) ?? []);
  for (const sp of b.services.values()) {
    if (!list.includes(`${sp.protocol} ${sp.clusterIP}:${sp.port} rr`)) out.push(`IPVS mode has no virtual server for ${sp.key}`);
    if (!bound.has(`${sp.clusterIP}/32`)) out.push(`IPVS mode did not bind ${sp.clusterIP} for ${sp.key}`);
    for (const ep of sp.endpoints) if (!list.some((l) => l.startsWith(`  -> ${ep.ip}:${ep.port} `))) out.push(`IPVS mode lacks real server ${ep.ip}:${ep.port} of ${sp.key}`);
  }
  return out;
}

/** Everything above for one generated pair of manifest sets (the second replacing the first); empty when all holds. */
async function problemsOf(first: GenWorld, second: GenWorld): Promise<string[]> {
  const decoder = new Decoder({ serviceCIDR: SERVICE_CIDR });
  const out: string[] = [];
  const snapshots: Snapshot[] = [];
  let changed: ReadonlySet<string> = new Set();
  for (const world of [first, second]) {
    const { results, built } = decode(decoder, world);
    const expected = expectedPorts(world);
    const keys = new Set(expected.map((e) => e.key));
    out.push(...parseProblems(results));
    out.push(...built.errors.map((e) => `cross-object error: ${e.message}`));
    out.push(...snapshotProblems(built.snapshot, expected));
    out.push(...(await renderProblems(built.snapshot, keys)));
    out.push(...netlinkProblems(built.snapshot));
    snapshots.push(built.snapshot);
    changed = built.changed ?? new Set();
  }
  const [a, b] = snapshots as [Snapshot, Snapshot];
  const keys = new Set([...a.services.keys(), ...b.services.keys()]);
  out.push(...conntrackProblems(a, b, changed));
  out.push(...(await iptablesSyncProblems(a, b, changed, keys)));
  out.push(...(await ipvsSyncProblems(a, b, changed, keys)));
  return out;
}

test('hostile strings in every field never reach a payload, a netlink message or argv; valid objects are still served', async (t) => {
  await fc.assert(
    fc.asyncProperty(worldArb, worldArb, async (first, second) => {
      const problems = await problemsOf(first, second);
      if (problems.length > 0) throw new Error(problems.slice(0, 10).join('\n'));
    }),
    { numRuns: RUNS, seed: SEED, includeErrorInReport: true },
  );
  t.pass();
});

test('the generator poisons every kind of object and every effect, and keeps many objects valid', (t) => {
  const worlds = fc.sample(worldArb, { numRuns: 200, seed: SEED });
  const objects = worlds.flatMap((w) => w.files.flatMap((f) => f.objects));
  const fates = new Set(objects.map((o) => `${o.kind} ${fate(o.poisons)}`));
  for (const kind of ['Service', 'EndpointSlice', 'Endpoints', 'Node']) {
    for (const f of ['ok', 'reject', 'ignore']) t.true(fates.has(`${kind} ${f}`), `${kind} ${f}`);
  }
  const effects = new Set(objects.flatMap((o) => o.poisons.map((p) => p.effect)));
  t.deepEqual([...effects].sort(), ['drop', 'ignore', 'reject', 'strip']);
  const valid = objects.filter((o) => fate(o.poisons) === 'ok').length;
  t.true(valid > objects.length / 3, `${valid} valid of ${objects.length}`);
  t.true(objects.some((o) => JSON.stringify(o.raw).includes(MARKER) && fate(o.poisons) === 'ok'), 'a valid object carries a hostile string in a field drover does not read');
});
