/**
 * Surviving the file source's worst days, in iptables mode, with real TCP
 * traffic through the ClusterIP the whole time (long-lived connections and
 * a new connection every 100 ms, counted as attempted, failed and lost):
 *
 *   - a manifest written in pieces, with a pause between them longer than
 *     the settle time: the Service alone, then its EndpointSlice;
 *   - a `kubectl get -o yaml` dump (a `kind: List`) cut short before its
 *     `kind` line, which kubectl prints after the items;
 *   - `ln -s .. manifests/up`: a symlink to the source folder's parent,
 *     which holds Services of its own and files written all the time.
 *
 * No new connection may fail, no long-lived one may break, and what lies
 * outside the source folder is never programmed. Every test builds its own
 * network namespaces and removes them, also on failure.
 */
import test, { type ExecutionContext } from 'ava';
import { open, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { assertConverged, CLUSTER_IP, finish, manifestWorld, reached, runFlags, startDrover, synced, traffic, type ManifestWorld } from '../support/faults.ts';
import { until } from '../support/wait.ts';

const unavailable = await testbedUnavailableReason();

const service = (name: string, ip: string) => `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: nsd}\nspec: {clusterIP: ${ip}, ports: [{name: http, port: 80, protocol: TCP}]}\n`;
const slice = (name: string, ips: readonly string[]) =>
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ${name}-1, namespace: nsd, labels: {kubernetes.io/service-name: ${name}}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n${ips.map((ip) => `  - {addresses: [${ip}], conditions: {ready: true}}\n`).join('')}`;
const B12 = ['10.180.0.1', '10.180.0.2'];
const B123 = ['10.180.0.1', '10.180.0.2', '10.180.0.3'];

/** `docs` as kubectl prints a List of them: `apiVersion` and the items first, `kind: List` and `metadata` after them. */
const listItems = (docs: readonly string[]) => `apiVersion: v1\nitems:\n${docs.map((d) => d.trimEnd().split('\n').map((l, i) => `${i === 0 ? '- ' : '  '}${l}\n`).join('')).join('')}`;
const LIST_TAIL = 'kind: List\nmetadata:\n  resourceVersion: ""\n';
/** web (the Service under traffic, endpoints `ips`) and three others, each with its EndpointSlice, as one List dump. */
const dump = (ips: readonly string[]) =>
  listItems([service('web', CLUSTER_IP), slice('web', ips), ...[1, 2, 3].flatMap((i) => [service(`api-${i}`, `172.30.1.${i}`), slice(`api-${i}`, ['10.180.0.3'])])]);

/** The source and kernel flags of every drover command of a case. */
const kernelFlags = (w: ManifestWorld) => ['--source', w.source, '--state-dir', join(w.scratch, 'state'), '--netns', w.topo.node, '--iptables-backend', 'nft', '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16'];

/** `iptables-nft-save -t nat` in the node namespace. */
const natSave = async (w: ManifestWorld) => (await run('iptables-nft-save', ['-t', 'nat'], { netns: w.topo.node })).stdout;

/** A world whose web.yaml holds `manifest`, with `drover run` on it, synced, serving b1 and b2, and traffic flowing. */
async function serving(t: ExecutionContext, manifest: string, extra: string[] = []) {
  const w = await manifestWorld(t, manifest);
  const d = startDrover([...kernelFlags(w), ...runFlags(w), ...extra]);
  t.teardown(() => d.stop());
  await synced(d, 1);
  await until('b1 and b2 served', async () => (await reached(w)) === 'b1,b2', 30_000);
  return { w, d, load: await traffic(t, w) };
}

/** Write `pieces` into `file` in place (truncated first, as `cp` and `kubectl get > file` do), pausing `pauseMs` between two pieces. */
async function writeInPieces(file: string, pieces: readonly string[], pauseMs: number): Promise<void> {
  const fh = await open(file, 'w');
  try {
    for (const [i, piece] of pieces.entries()) {
      if (i > 0) await new Promise((r) => setTimeout(r, pauseMs));
      await fh.write(piece);
      await fh.sync();
    }
  } finally {
    await fh.close();
  }
}

/** The pause of a writer between two pieces: well past the 200 ms settle time, well within the 10 s hold. */
const PAUSE_MS = 3000;

if (unavailable) {
  test.skip(`file source fault tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('a Service and its EndpointSlice written in pieces, with a pause between: no new connection refused', async (t) => {
    const { w, d, load } = await serving(t, `${service('web', CLUSTER_IP)}---\n${slice('web', B12)}`);
    await writeInPieces(w.file, [`${service('web', CLUSTER_IP)}---\n`, slice('web', B123)], PAUSE_MS);
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 30_000);
    const s = await finish(t, 'file written in pieces, 3 s pause', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    t.true(d.lines(/reads as 1 object where it held 2: it may still be being written/).length >= 1, 'the held file is logged');
    await assertConverged(t, ['diff', ...kernelFlags(w)]);
  });

  test.serial('a kind: List dump cut short before its kind line: every endpoint is held until the dump is whole', async (t) => {
    const { w, d, load } = await serving(t, `${dump(B12)}${LIST_TAIL}`);
    await writeInPieces(w.file, [dump(B123), LIST_TAIL], PAUSE_MS);
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 30_000);
    const s = await finish(t, 'List dump cut before its kind line, 3 s pause', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    t.true(d.lines(/has items but no kind: a List cut short/).length >= 1, 'the cut List is logged');
    const nat = await natSave(w);
    for (const i of [1, 2, 3]) t.regex(nat, new RegExp(`nsd/api-${i}:http cluster IP`), `api-${i} still programmed`);
    await assertConverged(t, ['diff', ...kernelFlags(w)]);
  });

  test.serial('ln -s .. manifests/up: nothing outside the source is read, programmed or watched; one warning', async (t) => {
    // The parent folder (the scratch folder) holds a Service of its own, and the status file drover rewrites at each sync.
    const { w, d, load } = await serving(t, `${service('web', CLUSTER_IP)}---\n${slice('web', B12)}`, ['--log-level', 'debug']);
    await writeFile(join(w.scratch, 'outside.yaml'), `${service('outside', '172.30.0.60')}---\n${slice('outside', ['10.180.0.3'])}`);
    const link = join(w.source, 'up');
    await symlink('..', link);
    // Either it is skipped with a warning, or (as drover once did) the parent folder is read.
    await until('the link read', async () => d.lines(/symlink to .* is not followed/).length > 0 || (await natSave(w)).includes('172.30.0.60'), 30_000);
    // The sync of the read that found the link is done (its line follows the warning), so that it is not counted below.
    const messages = () => d.lines(/./).map((l) => l.msg as string);
    await until('the sync after the link', async () => {
      const all = messages();
      const warned = all.findIndex((m) => /symlink to .* is not followed/.test(m));
      return all.some((m, i) => (warned < 0 || i > warned) && /sync done/.test(m));
    }, 30_000);
    // A log written line by line beside the source, with a manifest's name: no read, no sync.
    const before = d.lines(/sync done/).length;
    for (let i = 0; i < 10; i++) {
      await writeFile(join(w.scratch, 'drover-log.json'), `{"line": ${i}}\n`, { flag: 'a' });
      await new Promise((r) => setTimeout(r, 200));
    }
    await writeFile(join(w.scratch, 'later.yaml'), service('later', '172.30.0.61'));
    // A change inside the source still lands, after anything the writes above could have caused.
    await writeFile(w.file, `${service('web', CLUSTER_IP)}---\n${slice('web', B123)}`);
    await until('b3 served', async () => (await reached(w)) === 'b1,b2,b3', 30_000);
    const syncs = d.lines(/sync done/).length - before;
    const s = await finish(t, 'ln -s .. manifests/up', load);
    const nat = await natSave(w);
    t.log(`${syncs} syncs while files outside the source were written; Services from outside programmed: ${(nat.match(/-A KUBE-SERVICES .*172\.30\.0\.6[01]/g) ?? []).length}`);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    t.notRegex(nat, /172\.30\.0\.6[01]/, 'a Service from outside the source was programmed');
    t.regex(nat, /nsd\/web:http cluster IP/);
    // The change of web.yaml, and at most one periodic check.
    t.true(syncs <= 2, `${syncs} syncs while files outside the source were written`);
    const warned = d.lines(/symlink to .* is not followed/);
    t.deepEqual(warned.map((l) => l.msg), [`${link}: symlink to ${JSON.stringify(w.scratch)} (the source folder or one of its parent folders) is not followed: it would read the source folder again`]);
    t.deepEqual(d.lines(/^source is incomplete/), [], 'nothing was held for lack of a part');
    await assertConverged(t, ['diff', ...kernelFlags(w)]);
  });
}
