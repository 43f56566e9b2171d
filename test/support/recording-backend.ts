/** A Backend for proxier tests: records what each sync was asked to do, and programs nothing. */
import type { Backend, ChangeSet, SyncResult } from '../../src/proxier/backend.ts';

/** See the module comment; `calls` holds one entry per sync, the changed keys sorted. */
export class RecordingBackend implements Backend {
  readonly mode = 'iptables' as const;
  readonly calls: Array<{ services: string[]; full: boolean; changed: string[]; incomplete: boolean }> = [];
  async sync(s: { services: ReadonlyMap<string, unknown> }, c: ChangeSet): Promise<SyncResult> {
    this.calls.push({ services: [...s.services.keys()], full: c.full, changed: [...c.changed].sort(), incomplete: c.incomplete === true });
    return { full: c.full, services: s.services.size, endpoints: 0, written: {}, deleted: {}, bytes: 0, transactions: 0, readMs: 0, applyMs: 0, totalMs: 0 };
  }
  async cleanup() {
    return { removed: {}, kept: [] };
  }
}
