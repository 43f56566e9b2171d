/** The proxier's rule for an incomplete source: add and update, delete nothing, until the source is whole again. */
import test from 'ava';
import type { Backend, ChangeSet, SyncResult } from '../../src/modes/types.ts';
import { Proxier, type LastSync, type SourceRead } from '../../src/proxier/proxier.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

/** A backend that records what each sync was asked to do. */
class RecordingBackend implements Backend {
  readonly mode = 'iptables' as const;
  readonly calls: Array<{ services: string[]; full: boolean; changed: string[]; incomplete: boolean }> = [];
  async sync(s: { services: ReadonlyMap<string, unknown> }, c: ChangeSet): Promise<SyncResult> {
    this.calls.push({ services: [...s.services.keys()], full: c.full, changed: [...c.changed].sort(), incomplete: c.incomplete === true });
    return { full: c.full, services: s.services.size, endpoints: 0, chainsWritten: 0, chainsDeleted: 0, rulesWritten: 0, rulesDeleted: 0, bytes: 0, transactions: 0, readMs: 0, applyMs: 0, totalMs: 0 };
  }
  async cleanup() {
    return { chainsDeleted: 0, rulesDeleted: 0, kept: [] };
  }
}

const a = (eps: string[]) => sp('ns/a:http', '172.30.0.1', 80, eps.map((e) => ep(e)));
const b = sp('ns/b:http', '172.30.0.2', 80, [ep('10.180.0.9:80')]);

function setup(reads: SourceRead[]) {
  const backend = new RecordingBackend();
  const records: LastSync[] = [];
  let i = 0;
  const source = { load: async () => reads[Math.min(i++, reads.length - 1)]!, watch: () => {}, close: () => {} };
  const proxier = new Proxier({ source, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000, onSync: (l) => records.push(l) });
  return { backend, proxier, records };
}

test('a removal on an incomplete read is held back; the first whole read brings a full sync', async (t) => {
  const broken = ['f.yaml:13:1: document #3: syntax error: …; document skipped'];
  const { backend, proxier, records } = setup([
    { snapshot: snap(a(['10.180.0.1:80']), b) },
    { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])), incomplete: broken },
    { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])), incomplete: broken },
    { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])) },
    { snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80'])) },
  ]);
  for (let n = 0; n < 5; n++) await proxier.syncOnce();
  t.deepEqual(backend.calls, [
    { services: ['ns/a:http', 'ns/b:http'], full: true, changed: [], incomplete: false },
    // b is missing from the read: its removal waits; a's new endpoint is written.
    { services: ['ns/a:http'], full: false, changed: ['ns/a:http'], incomplete: true },
    { services: ['ns/a:http'], full: false, changed: [], incomplete: true },
    // Whole again: a full sync deletes what was held.
    { services: ['ns/a:http'], full: true, changed: [], incomplete: false },
    { services: ['ns/a:http'], full: false, changed: [], incomplete: false },
  ]);
  t.deepEqual(records.map((r) => r.incomplete), [[], broken, broken, [], []]);
});

test('a first sync on an incomplete read is a full sync that deletes nothing', async (t) => {
  const { backend, proxier } = setup([{ snapshot: snap(a(['10.180.0.1:80'])), incomplete: ['f.yaml: syntax error; file skipped'] }, { snapshot: snap(a(['10.180.0.1:80'])) }]);
  await proxier.syncOnce({ full: true });
  await proxier.syncOnce();
  t.deepEqual(backend.calls, [
    { services: ['ns/a:http'], full: true, changed: [], incomplete: true },
    { services: ['ns/a:http'], full: true, changed: [], incomplete: false },
  ]);
});
