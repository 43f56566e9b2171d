/**
 * One drover per network namespace: the lock that `drover run` holds for
 * as long as it runs, and that `cleanup` and `sync --once` take for their
 * work, so that two of them never program one namespace's rules against
 * each other (a second `run` with another `--source` would delete the
 * first one's Services at every full sync, and the first would put them
 * back).
 *
 * The lock is a file in {@link LOCK_DIR} named after the namespace's
 * identity (netns.ts: its nsfs st_dev and inode), so that every drover
 * process that sees the same `/run` finds it, whether it was started with
 * `--netns NAME` or inside the namespace (`ip netns exec NAME drover …`),
 * and whatever its `--state-dir`. One lock covers every mode: the modes
 * hook the same traffic (iptables and IPVS mode share chains, nftables
 * mode's table sits beside them), so two modes in one namespace fight too.
 *
 * The file holds its holder as JSON ({@link LockHolder}). It is taken with
 * link(2) of a complete temporary file, which fails with EEXIST when the
 * file exists, so no two processes hold it at once. A holder that is gone
 * (SIGKILL, a crash) leaves its file behind: the lock is stale when no
 * process of that PID runs, or the process of that PID started at another
 * time (its PID was reused; /proc/PID/stat field 22, proc(5)). A holder
 * in another PID namespace (a container's drover, seen through a shared
 * `/run`) cannot be checked that way, since its PID means another process
 * here: it counts as alive, so the lock is never taken from a live drover;
 * if that holder is gone, its file is removed by hand. A stale lock is
 * moved aside and taken; one that is no longer the stale one when moved (a
 * racing process took it meanwhile) is put back.
 */
import { readFileSync, readlinkSync, rmSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { link, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DroverError } from '../errors.ts';
import { namespaceIdentity } from './netns.ts';

/** Where the locks are: drover's runtime folder, emptied at each boot as namespace identities are. */
export const LOCK_DIR = '/run/drover';

/** Who holds a lock: what its file says. */
export interface LockHolder {
  /** The holder's process id. */
  readonly pid: number;
  /** Its start time, in clock ticks since boot (/proc/PID/stat field 22), telling a reused PID apart. */
  readonly startTime: string;
  /** Its PID namespace (`/proc/self/ns/pid` as readlink gives it, e.g. `pid:[4026531836]`), or '' when unknown: the namespace `pid` counts in. */
  readonly pidns: string;
  /** The command: `run`, `cleanup` or `sync`. */
  readonly command: string;
  /** Its `--mode`. */
  readonly mode: string;
  /** Its `--netns`, or null when it works in its own namespace. */
  readonly netns: string | null;
  /** When it took the lock (ISO 8601). */
  readonly since: string;
}

/** A lock held by this process. */
export interface InstanceLock {
  /** The lock file. */
  readonly path: string;
  /** The holder whose stale lock this process took over, if it did. */
  readonly replaced?: LockHolder;
  /** Give the lock up (remove the file, if it is still this process's); safe to call again. */
  release(): Promise<void>;
  /** {@link release}, synchronously (for a process `exit` handler). */
  releaseSync(): void;
}

/** The lock is held by a live process. */
export class InstanceLockedError extends DroverError {
  constructor(
    /** Who holds it. */
    readonly holder: LockHolder,
    /** The lock file. */
    readonly path: string,
    /** The namespace as the message names it: `network namespace NAME` or `this network namespace`. */
    readonly where: string,
  ) {
    super(`drover ${holder.command} (PID ${holder.pid}, --mode ${holder.mode}) holds ${where} since ${holder.since} (lock ${path})`);
    this.name = 'InstanceLockedError';
  }
}

/** What {@link acquireInstanceLock} takes. */
export interface LockRequest {
  /** The command taking it: `run`, `cleanup`, `sync`. */
  readonly command: string;
  readonly mode: string;
  /** `--netns`; undefined: the process's own namespace. */
  readonly netns?: string | undefined;
  /** The lock folder [{@link LOCK_DIR}]. */
  readonly dir?: string;
}

/** How often a lock that keeps changing under us is tried before giving up. */
const ATTEMPTS = 5;

/**
 * Take the lock of the namespace of `req.netns` (see the module comment).
 * @throws InstanceLockedError naming the live holder; DroverError when the
 *   namespace does not exist, or the lock keeps changing under this
 *   process; the file system's error when the folder cannot be written.
 */
export async function acquireInstanceLock(req: LockRequest): Promise<InstanceLock> {
  const dir = req.dir ?? LOCK_DIR;
  const where = req.netns === undefined ? 'this network namespace' : `network namespace ${req.netns}`;
  let id;
  try {
    id = await namespaceIdentity(req.netns);
  } catch (err) {
    throw new DroverError(`cannot lock ${where}: ${(err as Error).message}`, { cause: err });
  }
  const path = join(dir, `netns-${id.dev}-${id.inode}.lock`);
  const me: LockHolder = {
    pid: process.pid,
    startTime: (await processStartTime(process.pid)) ?? '',
    pidns: ownPidNamespace(),
    command: req.command,
    mode: req.mode,
    netns: req.netns ?? null,
    since: new Date().toISOString(),
  };
  const text = `${JSON.stringify(me)}\n`;
  await mkdir(dir, { recursive: true });
  // Unique per call, not only per process: two takers in one process must not share (and remove) one file.
  const tmp = `${path}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(tmp, text);
  let replaced: LockHolder | undefined;
  try {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        await link(tmp, path);
        return heldLock(path, text, replaced);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const found = await readIfThere(path);
      if (found === undefined) continue;
      const holder = parseHolder(found);
      if (holder !== undefined && (await isAlive(holder))) throw new InstanceLockedError(holder, path, where);
      if (await removeStale(path, found)) replaced = holder;
    }
  } finally {
    await rm(tmp, { force: true });
  }
  throw new DroverError(`cannot lock ${where}: the lock ${path} kept changing; try again`);
}

/** The {@link InstanceLock} of `path`, whose file holds `text`. */
function heldLock(path: string, text: string, replaced: LockHolder | undefined): InstanceLock {
  let released = false;
  return {
    path,
    ...(replaced !== undefined ? { replaced } : {}),
    async release() {
      if (released) return;
      released = true;
      // Only this process's file: never one that a successor took over.
      if ((await readIfThere(path)) === text) await rm(path, { force: true });
    },
    releaseSync() {
      if (released) return;
      released = true;
      let now: string | undefined;
      try {
        now = readFileSync(path, 'utf8');
      } catch {
        return;
      }
      if (now === text) rmSync(path, { force: true });
    },
  };
}

/**
 * Move the stale lock file (holding `staleText`) out of the way. When what
 * was moved is not it (a racing process took the lock meanwhile), it is put
 * back (unless yet another lock is there by then).
 * @returns whether the stale lock was removed.
 */
async function removeStale(path: string, staleText: string): Promise<boolean> {
  const aside = `${path}.${process.pid}.${randomUUID()}.stale`;
  try {
    await rename(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  const moved = await readIfThere(aside);
  const wasStale = moved === staleText;
  if (!wasStale) await link(aside, path).catch(() => undefined);
  await rm(aside, { force: true });
  return wasStale;
}

/** The file's text, or undefined when it does not exist. */
async function readIfThere(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The holder a lock file names, or undefined when it names none (garbage: stale). */
export function parseHolder(text: string): LockHolder | undefined {
  try {
    const h = JSON.parse(text) as Partial<LockHolder>;
    if (!Number.isSafeInteger(h.pid) || (h.pid as number) <= 0 || typeof h.startTime !== 'string') return undefined;
    return {
      pid: h.pid as number,
      startTime: h.startTime,
      pidns: typeof h.pidns === 'string' ? h.pidns : '',
      command: typeof h.command === 'string' ? h.command : 'run',
      mode: typeof h.mode === 'string' ? h.mode : 'unknown',
      netns: typeof h.netns === 'string' ? h.netns : null,
      since: typeof h.since === 'string' ? h.since : 'an unknown time',
    };
  } catch {
    return undefined;
  }
}

/**
 * Whether `holder` still runs: a process of its PID exists and started when
 * it did. A holder in another PID namespace than this process's cannot be
 * looked up, and counts as alive.
 */
export async function isAlive(holder: LockHolder): Promise<boolean> {
  if (holder.pidns !== '' && holder.pidns !== ownPidNamespace()) return true;
  const started = await processStartTime(holder.pid);
  return started !== undefined && (holder.startTime === '' || started === holder.startTime);
}

/**
 * The start time of process `pid` in clock ticks since boot (field 22 of
 * /proc/PID/stat, proc(5)), or undefined when there is no such process.
 * The command name (field 2, in parentheses) may hold spaces and
 * parentheses, so the fields are counted from its last `)`.
 */
export async function processStartTime(pid: number): Promise<string | undefined> {
  const stat = await readIfThere(`/proc/${pid}/stat`).catch(() => undefined);
  return stat === undefined ? undefined : startTimeField(stat);
}

/** Field 22 (starttime) of a /proc/PID/stat line, counted from the last `)` (see {@link processStartTime}); undefined when the line is too short. */
export function startTimeField(stat: string): string | undefined {
  // After ") " come field 3 (state) onwards: field 22 is the 20th of them.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

/** This process's PID namespace, as `/proc/self/ns/pid` links to it (`pid:[INODE]`, namespaces(7)); '' when it cannot be read. */
export function ownPidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return '';
  }
}
