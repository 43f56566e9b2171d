/** The pure parts of the bench's end-to-end clock: its manifest files, drover run's command line, /proc memory and log lines. */
import test from 'ava';
import { droverEntry, droverRunArgv, installedEntry, isSyncDone, parseProcMemory, STEADY_AFTER_MS, steadyMemory } from '../../src/bench/drover-process.ts';
import { DEFAULT_QUIET_MS } from '../../src/proxier/collect-after-sync.ts';
import { BULK_FILE, manifestText, ownFileName, serviceObjects, sourceFiles } from '../../src/bench/manifest-files.ts';
import { stepsPerSize } from '../../src/bench/run.ts';
import { clockServicePort, synthServicePort } from '../../src/bench/synth.ts';

const clock = clockServicePort(0, [
  { backend: 'b1', ip: '10.244.1.2', port: 8080 },
  { backend: 'b2', ip: '10.244.2.2', port: 8080 },
]);

test('one service port as a manifest file: a v1 List with its Service and EndpointSlice, one object per line', (t) => {
  t.is(
    manifestText([clock]),
    [
      '{',
      '  "apiVersion": "v1",',
      '  "kind": "List",',
      '  "items": [',
      '    {"apiVersion":"v1","kind":"Service","metadata":{"name":"clock-0","namespace":"bench"},"spec":{"type":"ClusterIP","clusterIP":"10.110.0.10","clusterIPs":["10.110.0.10"],"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}]}},',
      '    {"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"clock-0-1","namespace":"bench","labels":{"kubernetes.io/service-name":"clock-0"}},"addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],"endpoints":[{"addresses":["10.244.1.2"],"conditions":{"ready":true,"serving":true,"terminating":false}},{"addresses":["10.244.2.2"],"conditions":{"ready":true,"serving":true,"terminating":false}}]}',
      '  ]',
      '}',
      '',
    ].join('\n'),
  );
  t.is(manifestText([]), '{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [\n  ]\n}\n');
});

test('the source folder: the synthetic ports in services.json, each port given its own file apart', (t) => {
  const a = synthServicePort(0, 2);
  const b = synthServicePort(1, 2);
  const files = sourceFiles([a, clock, b], [clock]);
  t.deepEqual([...files.keys()], [BULK_FILE, 'clock-0.json']);
  t.is(files.get(BULK_FILE), manifestText([a, b]));
  t.is(files.get('clock-0.json'), manifestText([clock]));
  t.is(ownFileName(clock), 'clock-0.json');
});

test('a bench manifest refuses endpoints on several ports, or none', (t) => {
  const mixed = { ...clock, endpoints: [clock.endpoints[0]!, { ...clock.endpoints[1]!, port: 9090 }] };
  t.throws(() => serviceObjects(mixed), { message: 'bench/clock-0:http: a bench manifest needs endpoints on exactly one port, got 2' });
  t.throws(() => serviceObjects({ ...clock, endpoints: [] }), { message: 'bench/clock-0:http: a bench manifest needs endpoints on exactly one port, got 0' });
});

test('drover run of the end-to-end clock: in the node namespace, applying each change at once, with no servers', (t) => {
  const argv = droverRunArgv(
    { netns: 'drv-abc123-node', mode: 'iptables', iptablesVariant: 'nft', source: '/tmp/x/manifests', clusterCIDR: '10.244.0.0/16', workDir: '/tmp/x' },
    '/usr/bin/node',
    '/opt/drover/bin/drover.js',
  );
  t.deepEqual(argv, [
    'netns', 'exec', 'drv-abc123-node', '/usr/bin/node', '/opt/drover/bin/drover.js', 'run',
    '--source', '/tmp/x/manifests',
    '--mode', 'iptables',
    '--iptables-backend', 'nft',
    '--cluster-cidr', '10.244.0.0/16',
    '--min-sync-period', '0s',
    '--metrics-bind-address', '',
    '--healthz-bind-address', '',
    '--status-file', '/tmp/x/status.json',
    '--state-dir', '/tmp/x/state',
  ]);
});

test('memory from /proc/PID/status: VmRSS and VmHWM in kB; a status without them is an error', (t) => {
  const status = ['Name:\tnode', 'VmPeak:\t 1234567 kB', 'VmHWM:\t  150124 kB', 'VmRSS:\t  145912 kB', 'RssAnon:\t   90000 kB', ''].join('\n');
  t.deepEqual(parseProcMemory(status), { rssKb: 145912, hwmKb: 150124 });
  t.throws(() => parseProcMemory('Name:\tkthreadd\nState:\tS (sleeping)\n'), { message: '/proc status has no VmRSS line' });
});

test('the steady RSS of drover run is read only after its post-sync collection, not at the sync-done line', async (t) => {
  // A drover run whose RSS falls from 300 MB to 200 MB once its quiet time after the sync has passed and it collected.
  let clock = 0;
  const proc = { memory: async () => ({ rssKb: clock > DEFAULT_QUIET_MS ? 200_000 : 300_000, hwmKb: 330_000 }) };
  const waits: number[] = [];
  const wait = async (ms: number) => {
    waits.push(ms);
    clock += ms;
  };
  t.deepEqual(await steadyMemory(proc, undefined, wait), { rssKb: 200_000, hwmKb: 330_000 });
  t.deepEqual(waits, [STEADY_AFTER_MS]);
  t.true(STEADY_AFTER_MS >= DEFAULT_QUIET_MS + 3000, 'room for the collection (1-4 s at 10,000 service ports) after the quiet time');
});

test('a sync done is recognised in drover log lines, full or partial, and nothing else is', (t) => {
  t.true(isSyncDone('{"level":30,"time":1,"mode":"iptables","full":true,"msg":"full sync done"}'));
  t.true(isSyncDone('{"level":30,"time":1,"full":false,"changed":["bench/clock-0:http"],"msg":"partial sync done"}'));
  t.true(isSyncDone('{"level":30,"msg":"partial sync done; deletions held: the source is incomplete"}'));
  t.false(isSyncDone('{"level":50,"msg":"sync failed"}'));
  t.false(isSyncDone('{"level":30,"msg":"watching /tmp/x/manifests"}'));
});

test('the progress of a size counts each end-to-end change, only where the end-to-end clock runs', (t) => {
  // Full sync 1; 2 iterations × 4 changes × (drover, raw, kube-proxy-style) 24; 1 full re-render; final check 1; end to end 8; done 1.
  t.is(stepsPerSize(2, 1, 1, true), 36);
  // Above --detail-max: no kube-proxy-style baseline, no full re-render, no end-to-end change.
  t.is(stepsPerSize(2, 0, 0, false), 19);
});

test('drover run runs the build the bench runs: the sources from a TypeScript module, else the compiled build', (t) => {
  t.is(droverEntry('file:///opt/drover/src/bench/drover-process.ts'), 'src');
  t.is(droverEntry('file:///opt/drover/dist/bench/drover-process.js'), 'dist');
  t.is(droverEntry(), import.meta.url.endsWith('.ts') ? 'src' : 'dist', 'by default, the build these tests run: the sources through tsx, or compiled (npm test)');
});

test('a drover run without a choice of its own runs DROVER_ENTRY, else the build when there is one, else the sources', (t) => {
  t.is(installedEntry({}, true), 'dist');
  t.is(installedEntry({}, false), 'src');
  t.is(installedEntry({ DROVER_ENTRY: 'src' }, true), 'src');
  t.is(installedEntry({ DROVER_ENTRY: 'dist' }, false), 'dist');
  t.is(installedEntry({ DROVER_ENTRY: '' }, true), 'dist');
});
