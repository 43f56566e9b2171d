/**
 * In-memory ipset ({@link IpsetExec}) for unit tests: `ipset save` output
 * and `ipset restore -exist` input line by line, as ipset(8) takes them,
 * every entry checked with the real validation, failures reported as the
 * tool reports them (a CommandError naming the line).
 */
import { CommandError } from '../exec.ts';
import { checkEntry, type IpsetExec } from './ipset.ts';

/**
 * In-memory ipset (IpsetExec) with `-exist` semantics; `restore` is line by
 * line, like ipset: create, add, del, flush, swap and destroy.
 */
export class FakeIpset implements IpsetExec {
  /** Every restore input, in order. */
  readonly restores: string[] = [];
  /** Number of save() calls. */
  saves = 0;
  private readonly sets = new Map<string, { type: string; family?: 'inet6'; entries: Set<string> }>();

  async save(): Promise<string> {
    this.saves++;
    const out: string[] = [];
    for (const [name, s] of this.sets) {
      // As ipset save prints them: a bitmap:port set has a range and no family.
      out.push(s.type === 'bitmap:port' ? `create ${name} bitmap:port range 0-65535` : `create ${name} ${s.type} family ${s.family ?? 'inet'} hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5d1b1e6c`);
      for (const e of s.entries) out.push(`add ${name} ${e}`);
    }
    return out.length > 0 ? `${out.join('\n')}\n` : '';
  }

  async restore(input: string): Promise<void> {
    this.restores.push(input);
    const lines = input.split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      const fail = (why: string): never => {
        throw new CommandError('ipset restore -exist', 1, `ipset v7.17: Error in line ${i + 1}: ${why}`);
      };
      const w = line.split(' ');
      const [cmd, name] = w;
      if (!name || !/^[A-Za-z0-9_-]{1,31}$/.test(name)) fail('bad set name');
      const set = this.sets.get(name!);
      switch (cmd) {
        case 'create': {
          const type = w[2] ?? '';
          if (!['hash:ip', 'hash:ip,port', 'hash:ip,port,ip', 'hash:ip,port,net', 'bitmap:port'].includes(type)) fail(`unsupported set type ${type}`);
          if (set && set.type !== type) fail('Set cannot be created: set with the same name already exists');
          const f = w.indexOf('family');
          if (!set) this.sets.set(name!, { type, ...(f > 0 && w[f + 1] === 'inet6' ? { family: 'inet6' as const } : {}), entries: new Set() });
          return;
        }
        case 'add':
        case 'del': {
          if (!set) fail('The set with the given name does not exist');
          if (w.length !== 3) fail('bad entry');
          try {
            checkEntry(set!.type, w[2]!, set!.family === 'inet6' ? 'IPv6' : 'IPv4');
          } catch (err) {
            fail((err as Error).message);
          }
          if (cmd === 'add') set!.entries.add(w[2]!);
          else set!.entries.delete(w[2]!);
          return;
        }
        case 'destroy':
          if (!set) fail('The set with the given name does not exist');
          this.sets.delete(name!);
          return;
        case 'flush':
          if (!set) fail('The set with the given name does not exist');
          set!.entries.clear();
          return;
        case 'swap': {
          // ipset(8): both sets must exist and be of the same type; the kernel swaps them atomically.
          const other = this.sets.get(w[2] ?? '');
          if (!set || !other) fail('The set with the given name does not exist');
          if (set!.type !== other!.type) fail('The sets cannot be swapped: their type does not match');
          this.sets.set(name!, other!);
          this.sets.set(w[2]!, set!);
          return;
        }
        default:
          fail(`unknown command ${cmd}`);
      }
    });
  }

  /** The number of entries of a set, as `ipset list -t` prints it; undefined when it does not exist. */
  async entryCount(name: string): Promise<number | undefined> {
    return this.sets.get(name)?.entries.size;
  }

  /** Entries of a set, sorted, or undefined when it does not exist. */
  entries(name: string): string[] | undefined {
    const s = this.sets.get(name);
    return s ? [...s.entries].sort() : undefined;
  }

  /** Change a set behind drover's back (drift); entries are taken as given, as a hand-made `ipset add` may hold ones drover never writes. */
  setEntries(name: string, type: string, entries: string[]): void {
    this.sets.set(name, { type, entries: new Set(entries) });
  }
}
