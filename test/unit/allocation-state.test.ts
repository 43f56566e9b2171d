/** The allocation state file: ClusterIPs drover allocated, kept across restarts. */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { ALLOCATION_FILE, AllocationStateFile } from '../../src/sources/allocation-state.ts';
import { FileSource } from '../../src/sources/file.ts';
import { run } from '../../src/kernel/exec.ts';
import { silentLogger } from '../../src/util/log.ts';
import { FakeShepherd, shepherdService } from '../support/shepherd-api.ts';
import { recordingLogger } from './model-helpers.ts';
import { DROVER } from '../support/drover-bin.ts';


async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-state-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const shepherdFile = (name: string) =>
  JSON.stringify({ kind: 'Service', metadata: { name, namespace: 'default' }, spec: { ports: [{ port: 80, target_port: 8080 }] }, status: { endpoints: ['10.20.0.2:8080'] } });

test('the file source writes its allocations atomically, and a restarted one keeps them', async (t) => {
  const state = await tempDir(t);
  const manifests = await tempDir(t);
  await writeFile(join(manifests, 'web.json'), shepherdFile('web'));
  const first = AllocationStateFile.open(state, { logger: silentLogger(), writable: true });
  const loaded = await new FileSource(manifests, { serviceCIDR: '10.96.0.0/12', logger: silentLogger(), allocations: first }).load();
  await first.idle();
  const ip = loaded.snapshot.services.get('default/web')!.clusterIP;
  t.deepEqual(JSON.parse(await readFile(join(state, ALLOCATION_FILE), 'utf8')), { version: 1, allocations: { 'default/web': ip } });
  t.deepEqual(await readdir(state), [ALLOCATION_FILE], 'no temporary file left behind');

  // Another address on file (as if it had been probed onto): a restart keeps it, not the hash candidate.
  const other = ip === '10.96.0.77' ? '10.96.0.78' : '10.96.0.77';
  await writeFile(join(state, ALLOCATION_FILE), JSON.stringify({ version: 1, allocations: { 'default/web': other } }));
  const second = AllocationStateFile.open(state, { logger: silentLogger(), writable: true });
  const again = await new FileSource(manifests, { serviceCIDR: '10.96.0.0/12', logger: silentLogger(), allocations: second }).load();
  t.is(again.snapshot.services.get('default/web')!.clusterIP, other);
});

test('a read-only state file is read but never written', async (t) => {
  const state = await tempDir(t);
  const manifests = await tempDir(t);
  await writeFile(join(manifests, 'web.json'), shepherdFile('web'));
  const file = AllocationStateFile.open(state, { logger: silentLogger(), writable: false });
  await new FileSource(manifests, { serviceCIDR: '10.96.0.0/12', logger: silentLogger(), allocations: file }).load();
  await file.idle();
  t.deepEqual(await readdir(state), []);
});

test('a corrupt or foreign state file is warned about once and ignored; bad entries are dropped', async (t) => {
  const state = await tempDir(t);
  const path = join(state, ALLOCATION_FILE);
  const cases: Array<[string, RegExp]> = [
    ['{"version": 1, "allocations": {', /is not JSON/],
    ['{"version": 2, "allocations": {}}', /is not an allocation state file \(version: /],
    ['[]', /is not an allocation state file/],
  ];
  for (const [text, why] of cases) {
    await writeFile(path, text);
    const { logger, lines } = recordingLogger();
    const file = AllocationStateFile.open(state, { logger, writable: true });
    t.deepEqual([...file.initial], []);
    t.is(lines.length, 1);
    t.is(lines[0]!.level, 40);
    t.regex(lines[0]!.msg, why);
    t.regex(lines[0]!.msg, /starting with no remembered ClusterIPs$/);
  }
  await writeFile(path, JSON.stringify({ version: 1, allocations: { 'default/web': '10.96.0.5', 'default/bad': '10.96.0.300', 'no-slash': '10.96.0.6' } }));
  const { logger, lines } = recordingLogger();
  t.deepEqual([...AllocationStateFile.open(state, { logger, writable: true }).initial], [['default/web', '10.96.0.5']]);
  t.deepEqual(lines.map((l) => l.msg), [`allocation state file ${path}: 2 invalid entries ignored`]);

  const missing = recordingLogger();
  t.deepEqual([...AllocationStateFile.open(join(state, 'nowhere'), { logger: missing.logger, writable: true }).initial], []);
  t.deepEqual(missing.lines, [], 'a missing file is a fresh start, silently');
});

test('a state file that cannot be written is warned about once; drover goes on', async (t) => {
  const state = await tempDir(t);
  await writeFile(join(state, 'blocker'), '');
  const { logger, lines } = recordingLogger();
  const file = AllocationStateFile.open(join(state, 'blocker'), { logger, writable: true }); // a folder that is a file
  file.save(new Map([['default/web', '10.96.0.5']]));
  await file.idle();
  file.save(new Map([['default/web', '10.96.0.6']]));
  await file.idle();
  t.is(lines.length, 2);
  t.regex(lines[0]!.msg, /cannot be read \(ENOTDIR/);
  t.regex(lines[1]!.msg, /could not write the allocation state file .*blocker\/allocations\.json; allocated ClusterIPs may change at the next restart/);
});

test('drover render --source shepherd+http://127.0.0.1:PORT prints the rules, with the ClusterIPs of the state file', async (t) => {
  const state = await tempDir(t);
  const server = await FakeShepherd.start({ token: 'tok' });
  t.teardown(() => server.stop());
  server.set('default', [shepherdService('default', 'web', [{ name: 'http', port: 80, target_port: 8080, protocol: 'tcp' }], ['10.20.0.2:8080', '10.20.0.3:8080'])]);
  await writeFile(join(state, ALLOCATION_FILE), JSON.stringify({ version: 1, allocations: { 'default/web': '10.96.7.7' } }));
  const render = (token: string) =>
    run('env', [`SHEPHERD_API_TOKEN=${token}`, process.execPath, DROVER, 'render', '--source', server.source, '--state-dir', state], {
      allowFail: true,
      timeoutMs: 240_000,
    });
  const res = await render('tok');
  t.is(res.stderr, '');
  t.is(res.code, 0);
  t.regex(res.stdout, /^# default\/web:http: ClusterIP 10\.96\.7\.7:80\/TCP \(allocated by drover\), 2 ready of 2 endpoints$/m);
  t.regex(res.stdout, /-A KUBE-SERVICES -d 10\.96\.7\.7\/32 -p tcp -m comment --comment "default\/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-/);
  t.regex(res.stdout, /-A KUBE-SEP-\w+ -p tcp -m comment --comment "?default\/web:http"? -m tcp -j DNAT --to-destination 10\.20\.0\.3:8080/);
  t.deepEqual(await readdir(state), [ALLOCATION_FILE], 'render does not write the state');

  const denied = await render('');
  t.is(denied.code, 1);
  t.is(denied.stderr, `drover: ${server.url}/api/v1/namespaces: HTTP 401 "unauthorized"; set SHEPHERD_API_TOKEN\n`);
});
