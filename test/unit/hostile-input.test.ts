/**
 * Hostile input (property-based): names, namespaces, port names, labels,
 * annotations, endpoint fields, IP and protocol strings carrying newlines,
 * quotes, spaces, `--`, shell characters or non-ASCII text go through the
 * file source's decoding (Decoder: parse.ts, normalise.ts), every mode's
 * `render`, every mode's sync on its fakes (ModeDriver.fake), the IPVS
 * netlink encoders and conntrack's argument vector. Every mode of the
 * registry runs it (src/modes/registry.ts). For every generated manifest set:
 *
 * - an object with a hostile value in a field drover reads is skipped with a
 *   one-line ManifestError naming its file, kind and that field; one with a
 *   hostile apiVersion, kind or addressType is ignored; a hostile value in a
 *   field drover does not read changes nothing; a bad endpoint address drops
 *   that endpoint only; nothing throws;
 * - every port of every valid Service is in the snapshot with exactly its
 *   valid endpoints, and is rendered in every mode and programmed by every
 *   mode's backend: a connection from a pod to its ClusterIP, traced
 *   through the fakes, reaches exactly its endpoints;
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
} from '../../src/kernel/ipvs/codec.ts';
import { allModes } from '../../src/modes/registry.ts';
import { renderConfig } from '../../src/modes/shared/render-config.ts';
import { Decoder } from '../../src/sources/decoder.ts';
import { fate, MARKER, worldArb, type GenObject, type GenService, type GenWorld } from '../support/hostile.ts';
import { anyModeProblems, commentsOf, nftCommentsOf } from '../support/payload-lines.ts';
import { reachedOf } from '../support/packet-flow.ts';
import { trace } from '../../src/inspect/trace.ts';

const SERVICE_CIDR = '10.96.0.0/12';
/** `render`'s options; the cluster CIDR is the one of the IPVS fakes (ipvs-world.ts). */
const OPTS = { render: { source: 'hostile', masqueradeAll: false, clusterCidr: '10.244.0.0/16', serviceCidr: SERVICE_CIDR }, modes: {} };
const SEED = Number(process.env.FC_SEED ?? 20261201);
const RUNS = 200;

/** What every mode's `render` writes for an empty snapshot: its static rules, or its layout. */
const EMPTY_RENDERS = await Promise.all(allModes().map(async (m) => (await m.render(EMPTY_SNAPSHOT, OPTS, [])).text));
/** The comments of each mode's static rules (`--comment "…"`). */
const STATIC_COMMENTS = new Set(EMPTY_RENDERS.flatMap((text) => [...commentsOf(text)]));
/** The comments of each mode's static layout as nft writes them (`comment "…"`). */
const NFT_STATIC_COMMENTS = new Set(EMPTY_RENDERS.flatMap((text) => [...nftCommentsOf(text)]));
/** A pod on the node (inside the cluster CIDR): the client whose connections to each ClusterIP are traced. */
const POD = '10.244.9.2';

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

/** Problems of each mode's `render`: its lines, and each valid service port in it (its ClusterIP and its endpoints' addresses). */
async function renderProblems(snapshot: Snapshot, keys: ReadonlySet<string>): Promise<string[]> {
  const out: string[] = [];
  for (const mode of allModes()) {
    const r = await mode.render(snapshot, OPTS, serviceSummary(snapshot));
    out.push(...anyModeProblems([r.text], keys, STATIC_COMMENTS, NFT_STATIC_COMMENTS).map((p) => `${mode.name} render: ${p}`));
    out.push(...r.leftOut.map((l) => `${mode.name} render left out: ${l}`));
    const words = new Set(r.text.split(/[\s,:/]+/));
    for (const sp of snapshot.services.values()) {
      for (const ip of [sp.clusterIP, ...sp.endpoints.map((e) => e.ip)]) if (!words.has(ip)) out.push(`${mode.name} render lacks ${ip} of ${sp.key}`);
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

/**
 * Problems of each mode's sync of `a` (full) then `b` (partial), on its
 * fakes: every line written, and what a pod's connection to each service
 * port of `b` reaches, traced through the fakes: exactly its endpoints, or
 * a refusal when it has none.
 */
async function syncProblems(a: Snapshot, b: Snapshot, changed: ReadonlySet<string>, keys: ReadonlySet<string>): Promise<string[]> {
  const out: string[] = [];
  for (const mode of allModes()) {
    const fake = await mode.fake({ render: renderConfig(OPTS.render), nodeAddresses: ['192.168.100.1'], serviceCIDR: SERVICE_CIDR });
    await fake.backend.sync(a, { full: true, changed: new Set() });
    await fake.backend.sync(b, { full: false, changed });
    out.push(...anyModeProblems(fake.written(), keys, STATIC_COMMENTS, NFT_STATIC_COMMENTS).map((p) => `${mode.name} mode: ${p}`));
    const ctx = await fake.trace();
    for (const sp of b.services.values()) {
      const outcomes = trace(ctx, { src: POD, dst: sp.clusterIP, dport: sp.port, proto: sp.protocol.toLowerCase() as 'tcp' | 'udp' | 'sctp' }).outcomes;
      const reached = reachedOf(outcomes);
      const want = sp.endpoints.length > 0 ? sp.endpoints.map((e) => `${e.ip}:${e.port}`).sort() : ['reject'];
      if (JSON.stringify(reached) !== JSON.stringify(want)) out.push(`${mode.name} mode: ${sp.key} at ${sp.clusterIP}:${sp.port}/${sp.protocol} reaches ${reached.join(' ')}, expected ${want.join(' ')}`);
    }
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
  out.push(...(await syncProblems(a, b, changed, keys)));
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
