/** The single-instance lock of a network namespace (src/util/instance-lock.ts), in a folder of its own. */
import test from 'ava';
import { pino } from 'pino';
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lockNamespace } from '../../src/cli/setup.ts';
import { acquireInstanceLock, InstanceLockedError, ownPidNamespace, parseHolder, processStartTime, startTimeField, type LockHolder } from '../../src/util/instance-lock.ts';

async function folder(t: { teardown(f: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-lock-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** The lock file of this process's own network namespace in `dir`. */
async function ownLock(dir: string): Promise<string> {
  const st = await stat('/proc/self/ns/net');
  return join(dir, `netns-${st.dev}-${st.ino}.lock`);
}

/** The PID of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((r) => child.once('exit', r));
  return child.pid!;
}

test('the lock is a file named by the namespace identity, naming its holder; a second taker is refused with that holder', async (t) => {
  const dir = await folder(t);
  const lock = await acquireInstanceLock({ command: 'run', mode: 'iptables', dir });
  t.is(lock.path, await ownLock(dir));
  const holder = JSON.parse(await readFile(lock.path, 'utf8')) as LockHolder;
  t.like(holder, { pid: process.pid, startTime: await processStartTime(process.pid), pidns: ownPidNamespace(), command: 'run', mode: 'iptables', netns: null });
  t.regex(holder.pidns, /^pid:\[\d+\]$/);
  const err = await t.throwsAsync(acquireInstanceLock({ command: 'cleanup', mode: 'nftables', dir }), { instanceOf: InstanceLockedError });
  t.is(err!.message, `drover run (PID ${process.pid}, --mode iptables) holds this network namespace since ${holder.since} (lock ${lock.path})`);
  t.deepEqual(err!.holder, holder);
  t.deepEqual(await readdir(dir), [lock.path.slice(dir.length + 1)], 'no temporary file left behind');

  await lock.release();
  await t.throwsAsync(stat(lock.path), { code: 'ENOENT' });
  const again = await acquireInstanceLock({ command: 'run', mode: 'iptables', dir });
  t.is(again.replaced, undefined);
  again.releaseSync();
  t.deepEqual(await readdir(dir), []);
});

test('takers racing for a free lock: exactly one gets it', async (t) => {
  const dir = await folder(t);
  const results = await Promise.allSettled(Array.from({ length: 8 }, () => acquireInstanceLock({ command: 'run', mode: 'iptables', dir })));
  t.is(results.filter((r) => r.status === 'fulfilled').length, 1);
  for (const r of results) if (r.status === 'rejected') t.true(r.reason instanceof InstanceLockedError, String(r.reason));
});

test('a stale lock is taken over: its holder is gone, its PID now runs another process, or the file names no holder', async (t) => {
  const dir = await folder(t);
  const path = await ownLock(dir);
  const gone: LockHolder = { pid: await deadPid(), startTime: '1', pidns: ownPidNamespace(), command: 'run', mode: 'iptables', netns: null, since: '2020-01-01T00:00:00.000Z' };
  const reused: LockHolder = { ...gone, pid: process.pid, startTime: `${Number(await processStartTime(process.pid)) + 1}` };
  for (const [what, text, replaced] of [
    ['a holder that is gone', JSON.stringify(gone), gone],
    ['a PID reused by another process', JSON.stringify(reused), reused],
    ['garbage', '{"pid": "x"', undefined],
    ['an empty file', '', undefined],
  ] as const) {
    await writeFile(path, text);
    const lock = await acquireInstanceLock({ command: 'run', mode: 'nftables', dir });
    t.deepEqual(lock.replaced, replaced, what);
    t.like(JSON.parse(await readFile(path, 'utf8')), { pid: process.pid, mode: 'nftables' }, what);
    await lock.release();
  }
  t.deepEqual(await readdir(dir), []);
});

test('a holder in another PID namespace counts as alive: its PID cannot be looked up here, so its lock is never taken', async (t) => {
  const dir = await folder(t);
  const path = await ownLock(dir);
  // A container's drover seen through a shared /run: its PID may be gone here, or be another process.
  for (const pid of [await deadPid(), 1]) {
    const holder: LockHolder = { pid, startTime: '1', pidns: 'pid:[1]', command: 'run', mode: 'iptables', netns: null, since: '2020-01-01T00:00:00.000Z' };
    await writeFile(path, JSON.stringify(holder));
    const err = await t.throwsAsync(acquireInstanceLock({ command: 'cleanup', mode: 'iptables', dir }), { instanceOf: InstanceLockedError });
    t.deepEqual(err!.holder, holder);
    t.is(await readFile(path, 'utf8'), JSON.stringify(holder), 'the lock is left as it was');
  }
});

test("releasing leaves alone a lock that is no longer this process's", async (t) => {
  const dir = await folder(t);
  const lock = await acquireInstanceLock({ command: 'run', mode: 'iptables', dir });
  const successor = JSON.stringify({ pid: process.pid, startTime: '', command: 'run', mode: 'ipvs', netns: null, since: 'now' });
  await writeFile(lock.path, successor);
  await lock.release();
  lock.releaseSync();
  t.is(await readFile(lock.path, 'utf8'), successor);
});

test('a namespace that does not exist is one line naming it', async (t) => {
  const dir = await folder(t);
  const err = await t.throwsAsync(acquireInstanceLock({ command: 'run', mode: 'iptables', netns: 'drover-no-such-netns', dir }));
  t.regex(err!.message, /^cannot lock network namespace drover-no-such-netns: ENOENT: no such file or directory, stat '\/run\/netns\/drover-no-such-netns'$/);
});

test('the start time is field 22 of /proc/PID/stat, counted from the last parenthesis of the command name', (t) => {
  const rest = 'S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 98765 20 21';
  t.is(startTimeField(`4242 (a) b (c) ${rest}`), '98765');
  t.is(startTimeField(`4242 (drover) ${rest}`), '98765');
  t.is(startTimeField('4242 (x) S 1'), undefined);
});

test('a holder is read from its JSON; a file that names no PID names no holder', (t) => {
  t.deepEqual(parseHolder('{"pid": 7, "startTime": "9"}'), { pid: 7, startTime: '9', pidns: '', command: 'run', mode: 'unknown', netns: null, since: 'an unknown time' });
  t.is(parseHolder('{"pid": 0, "startTime": "9"}'), undefined);
  t.is(parseHolder('[]'), undefined);
  t.is(parseHolder('not json'), undefined);
});

test('the commands take the lock through lockNamespace: refused in one line, --force goes on with a warning, a folder that cannot be written is a warning', async (t) => {
  const dir = await folder(t);
  const logged: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
  const lock = await lockNamespace('run', { mode: 'iptables' }, logger, { dir });
  t.truthy(lock);
  t.teardown(() => lock?.release());
  let closed = 0;
  const err = await t.throwsAsync(lockNamespace('cleanup', { mode: 'iptables' }, logger, { dir, close: { close: () => void closed++ } }));
  t.regex(err!.message, new RegExp(`^drover run \\(PID ${process.pid}, --mode iptables\\) holds this network namespace since \\S+ \\(lock \\S+\\): it would put back what cleanup removes; stop it first, or give --force$`));
  t.is(closed, 1, 'the backend made before the refusal is closed');
  t.is(await lockNamespace('cleanup', { mode: 'iptables' }, logger, { dir, force: true }), undefined);
  t.regex(String(logged.at(-1)?.msg), /; going on anyway \(--force\)$/);

  const file = join(dir, 'not-a-folder');
  await writeFile(file, '');
  t.is(await lockNamespace('run', { mode: 'iptables' }, logger, { dir: join(file, 'locks') }), undefined);
  t.like(logged.at(-1), { level: 40, msg: 'cannot take the lock of the network namespace; going on without it: another drover there is not refused' });
});
