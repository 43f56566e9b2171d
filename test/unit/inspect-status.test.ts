import test from 'ava';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { ownedRuleCounts } from '../../src/modes/shared/kube-chains/ruleset.ts';
import { readTables } from '../../src/kernel/iptables/live.ts';
import {
  ago,
  formatStatus,
  NotRunError,
  readStatusFile,
  type RunInfo,
  type StatusRecord,
} from '../../src/inspect/status.ts';
import { Proxier } from '../../src/proxier/proxier.ts';
import { StatusFileWriter } from '../../src/proxier/status-file.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const RUN: RunInfo = {
  pid: 4242,
  mode: 'iptables',
  iptablesBackend: 'auto',
  netns: null,
  source: '/etc/drover/manifests',
  render: { clusterCidr: '10.244.0.0/16', masqueradeAll: false, serviceCidr: '10.96.0.0/12' },
};
const NOW = Date.parse('2025-06-01T10:00:12.000Z');
const OK = { at: '2025-06-01T10:00:00.000Z', kind: 'full', durationMs: 22.8, error: null, services: 2, endpoints: 3 } as const;

async function tempDir(t: { teardown: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-status-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('status after a successful sync, without drift', (t) => {
  const record: StatusRecord = { version: 1, ...RUN, lastSync: OK, lastSuccess: OK };
  t.is(
    formatStatus({ file: '/run/drover/status.json', record, running: true, rules: { filter: 6, nat: 25 }, drift: { differences: 0 }, now: NOW }),
    `status file: /run/drover/status.json (pid 4242, running)
mode:        iptables
source:      /etc/drover/manifests (--cluster-cidr 10.244.0.0/16 --service-cidr 10.96.0.0/12)
services:    2 service ports, 3 endpoints (last successful sync)
rules:       31 drover-owned rules in the kernel (filter 6, nat 25)
last sync:   2025-06-01T10:00:00.000Z (12 s ago), full, 22.8 ms, ok
drift:       no
`,
  );
});

test('status after a sync on an incomplete source names what could not be read, at most three, and that deletions wait', (t) => {
  const missing = [
    '/etc/drover/manifests/f.yaml:17:1: document #3 (from line 14): syntax error: Flow map in block collection must be sufficiently indented and end with a }; document skipped',
    '/etc/drover/manifests/g.yaml: Service nsd/x: spec.ports[0].port: 70000 is out of range 1-65535',
    '/etc/drover/manifests/h.yaml: syntax error: Map keys must be unique; file skipped',
    '/etc/drover/manifests/i.yaml: file is 40 MiB, larger than the 32 MiB limit; file skipped',
  ];
  const sync = { ...OK, incomplete: missing };
  const record: StatusRecord = { version: 1, ...RUN, lastSync: sync, lastSuccess: sync };
  t.is(
    formatStatus({ file: '/run/drover/status.json', record, running: true, rules: { filter: 6, nat: 25 }, drift: { differences: 0 }, now: NOW }),
    `status file: /run/drover/status.json (pid 4242, running)
mode:        iptables
source:      /etc/drover/manifests (--cluster-cidr 10.244.0.0/16 --service-cidr 10.96.0.0/12)
source read: incomplete: 4 parts could not be read; no service port is deleted until it is whole
  missing:   ${missing[0]}
  missing:   ${missing[1]}
  missing:   ${missing[2]}
  missing:   (1 more in the log)
services:    2 service ports, 3 endpoints (last successful sync)
rules:       31 drover-owned rules in the kernel (filter 6, nat 25)
last sync:   2025-06-01T10:00:00.000Z (12 s ago), full, 22.8 ms, ok
drift:       no
`,
  );
});

test('status after a failed sync shows the error, the last successful sync and the drift', (t) => {
  const failed = { at: '2025-06-01T10:00:10.000Z', kind: 'partial', durationMs: 4.06, error: 'iptables-restore failed at line 3: -X KUBE-SEP-X: chain in use', services: null, endpoints: null } as const;
  const record: StatusRecord = {
    version: 1,
    ...RUN,
    netns: 'node1',
    render: { clusterCidr: null, masqueradeAll: true, serviceCidr: '10.96.0.0/12' },
    lastSync: failed,
    lastSuccess: OK,
  };
  t.is(
    formatStatus({ file: '/tmp/s.json', record, running: false, rules: { filter: 6, nat: 20 }, drift: { differences: 2 }, now: NOW }),
    `status file: /tmp/s.json (pid 4242, not running)
mode:        iptables, network namespace node1
source:      /etc/drover/manifests (--masquerade-all --service-cidr 10.96.0.0/12)
services:    2 service ports, 3 endpoints (last successful sync)
rules:       26 drover-owned rules in the kernel (filter 6, nat 20)
last sync:   2025-06-01T10:00:10.000Z (2 s ago), partial, 4.1 ms, error: iptables-restore failed at line 3: -X KUBE-SEP-X: chain in use
last ok:     2025-06-01T10:00:00.000Z (12 s ago), full, 22.8 ms, ok
drift:       yes, 2 differences (drover diff lists them)
`,
  );
});

test('status before any successful sync, with a source that cannot be read', (t) => {
  const failed = { ...OK, error: 'ENOENT: no such file or directory', services: null, endpoints: null };
  const record: StatusRecord = { version: 1, ...RUN, lastSync: failed, lastSuccess: null };
  const text = formatStatus({ file: 'f', record, running: true, rules: { filter: 0, nat: 0 }, drift: { error: 'ENOENT: /etc/drover/manifests' }, now: NOW });
  t.true(text.includes('\nservices:    unknown: no successful sync yet\n'), text);
  t.true(text.includes('\nlast ok:     never\n'), text);
  t.true(text.endsWith('\ndrift:       unknown: ENOENT: /etc/drover/manifests\n'), text);
});

test('ago rounds down to the largest unit', (t) => {
  t.deepEqual(
    [0, 59_999, 60_000, 3_599_999, 3_600_000, 86_400_000 * 3, -5000].map((d) => ago(NOW - d, NOW)),
    ['0 s ago', '59 s ago', '1 min ago', '59 min ago', '1 h ago', '3 d ago', '0 s ago'],
  );
});

test('ownedRuleCounts counts drover-owned rules and hooks, not other chains', async (t) => {
  const fake = new FakeIptables();
  await new IptablesBackend({ exec: fake, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, logger: silentLogger() }).sync(
    snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080'), ep('10.244.1.3:8080')]), sp('default/db:pg', '10.96.0.11', 5432, [])),
    { full: true, changed: new Set() },
  );
  fake.setChain('filter', 'DOCKER-USER', ['-j RETURN']);
  fake.chain('filter', 'FORWARD')!.push('-j DOCKER-USER');
  // filter: 10 hooks, 3 KUBE-FORWARD (the INVALID drop first), 1 REJECT. nat: 5 hooks, 1 KUBE-MARK-MASQ, 3 KUBE-POSTROUTING,
  // 1 KUBE-SERVICES jump, 3 KUBE-SVC, 2 × 2 KUBE-SEP.
  t.deepEqual(ownedRuleCounts(loadStaticRules(), await readTables(fake)), { filter: 14, nat: 17 });
});

test('drover run records every sync attempt: atomically, with the last success kept after a failure', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'run', 'drover', 'status.json');
  const fake = new FakeIptables();
  const writer = new StatusFileWriter(path, RUN, silentLogger());
  const proxier = new Proxier({
    source: { load: async () => ({ snapshot: snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')])) }), watch: () => {}, close: () => {} },
    backend: new IptablesBackend({ exec: fake, render: { masqueradeAll: false }, logger: silentLogger() }),
    logger: silentLogger(),
    minSyncPeriodMs: 0,
    syncPeriodMs: 60_000,
  });
  writer.listen(proxier);
  await proxier.syncOnce();
  await writer.idle();
  const first = await readStatusFile(path);
  t.like(first, { ...RUN, version: 1, lastSync: { kind: 'full', error: null, services: 1, endpoints: 1 } });
  t.deepEqual(first.lastSuccess, first.lastSync);
  t.deepEqual(await readdir(join(dir, 'run', 'drover')), ['status.json'], 'no temporary file left behind');

  fake.chain('nat', 'KUBE-SERVICES')!.length = 0; // drift, so that the full sync writes
  fake.failNextRestore(new Error('iptables-restore failed at line 2: boom'));
  await t.throwsAsync(proxier.syncOnce({ full: true }));
  await writer.idle();
  const second = await readStatusFile(path);
  t.like(second.lastSync, { kind: 'full', error: 'iptables-restore failed at line 2: boom', services: null, endpoints: null });
  t.deepEqual(second.lastSuccess, first.lastSync);
});

test('no status file means drover has not run; a broken one is named', async (t) => {
  const dir = await tempDir(t);
  const missing = join(dir, 'status.json');
  const err = await t.throwsAsync(readStatusFile(missing), { instanceOf: NotRunError });
  t.is(err?.message, `drover has not run: no status file at ${missing}`);
  await writeFile(missing, JSON.stringify({ version: 1, pid: 'x' }));
  await t.throwsAsync(readStatusFile(missing), { message: `${missing}: not a drover status file: pid: expected number, got string "x" (and 7 more problems)` });
  await writeFile(missing, '{');
  await t.throwsAsync(readStatusFile(missing), { message: new RegExp(`^${missing}: not JSON: `) });
});
