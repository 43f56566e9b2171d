/** drover's logs: JSON lines with the level by name, kube-proxy's klog text format, and kube-proxy's -v as verbosity. */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { Command } from 'commander';
import { rewriteKubeProxyFlags } from '../../src/cli/command-line.ts';
import { applyLogOptions } from '../../src/cli/log-options.ts';
import { kernelOptions } from '../../src/cli/options.ts';
import { klogLine, levelForVerbosity, moreVerbose } from '../../src/util/log.ts';
import { moduleArgv } from '../../src/util/node-module.ts';

/** node, its loader arguments and src/util/log as this test runs: compiled, or the .ts through tsx. */
const [NODE, ...LOADER] = moduleArgv(import.meta.url, '../../src/util/log');
const LOG = LOADER.pop()!;

/** What createLogger(level, format) writes on stderr for an info line with fields, a debug line and a warning, in a process of its own. */
function logged(level: string, format?: string): string {
  const code = `const { createLogger } = await import(${JSON.stringify(LOG)});
const log = createLogger(${JSON.stringify(level)}${format ? `, ${JSON.stringify(format)}` : ''});
log.info({ mode: 'iptables', full: true, services: 3, written: { chain: 2 }, err: 'said "no"' }, 'full sync done');
log.debug('quiet');
log.warn('careful');`;
  const r = spawnSync(NODE!, [...LOADER, '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stderr;
}

test('JSON lines name their level, and the process logger writes them on stderr', (t) => {
  const lines = logged('info').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  t.deepEqual(lines.map((l) => [l.level, l.msg]), [['info', 'full sync done'], ['warn', 'careful']]);
  t.like(lines[0], { app: 'drover', mode: 'iptables', full: true, services: 3, written: { chain: 2 } });
  t.regex(String(lines[0]!.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

test("--log-format text writes kube-proxy's klog lines: severity, date, time, pid, quoted message, key=value", (t) => {
  const lines = logged('debug', 'text').trim().split('\n');
  t.is(lines.length, 3);
  t.regex(lines[0]!, /^I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ drover\] "full sync done" mode="iptables" full=true services=3 written=\{"chain":2\} err="said \\"no\\""$/);
  t.regex(lines[1]!, /^I\d{4} [\d:.]+ +\d+ drover\] "quiet"$/, 'debug is a verbose Info line in klog');
  t.regex(lines[2]!, /^W\d{4} [\d:.]+ +\d+ drover\] "careful"$/);
});

test('klogLine: the header in UTC with microseconds and a 7-wide pid; each level its letter', (t) => {
  const at = '2025-01-02T15:04:05.123Z';
  t.is(klogLine(JSON.stringify({ level: 'error', time: at, app: 'drover', family: 'IPv6', msg: 'sync failed' }), 42), 'E0102 15:04:05.123000      42 drover] "sync failed" family="IPv6"\n');
  t.is(klogLine(JSON.stringify({ level: 'fatal', time: at, msg: 'x' }), 1), 'F0102 15:04:05.123000       1 drover] "x"\n');
  t.is(klogLine(JSON.stringify({ level: 'trace', time: at, msg: 'x', n: null }), 1), 'I0102 15:04:05.123000       1 drover] "x" n=null\n');
});

test("kube-proxy's -v: 0-3 info, 4 debug, 5 and more trace (Kubernetes logging conventions)", (t) => {
  t.deepEqual([0, 1, 2, 3, 4, 5, 9].map(levelForVerbosity), ['info', 'info', 'info', 'info', 'debug', 'trace', 'trace']);
  t.throws(() => levelForVerbosity(-1), { instanceOf: RangeError });
  t.throws(() => levelForVerbosity(1.5), { instanceOf: RangeError });
  t.is(moreVerbose('warn', 'debug'), 'debug');
  t.is(moreVerbose('trace', 'info'), 'trace');
  t.is(moreVerbose('silent', 'error'), 'error');
});

/** The logLevel a command sees after the preAction hook, for `args`. */
async function levelAfter(args: string[]): Promise<unknown> {
  let seen: Record<string, unknown> = {};
  const cmd = new Command('x').exitOverride().configureOutput({ writeErr: () => {} });
  for (const o of kernelOptions()) cmd.addOption(o);
  cmd.hook('preAction', (c) => applyLogOptions(c)).action((o: Record<string, unknown>) => void (seen = o));
  // kube-proxy's -v and --v reach the command as --verbosity, as drover's own command line rewrites them.
  const { args: rewritten } = rewriteKubeProxyFlags(cmd, args, 'iptables');
  await cmd.parseAsync(['node', 'x', ...rewritten]);
  return seen.logLevel;
}

test('-v raises --log-level, never lowers it; --log-format is a choice of json and text', async (t) => {
  t.is(await levelAfter([]), 'info');
  t.is(await levelAfter(['-v', '2']), 'info');
  t.is(await levelAfter(['--v', '4']), 'debug');
  t.is(await levelAfter(['-v', '6']), 'trace');
  t.is(await levelAfter(['--log-level', 'trace', '-v', '2']), 'trace');
  t.is(await levelAfter(['--log-level', 'warn', '-v', '4']), 'debug');
  t.is(await levelAfter(['--log-level', 'warn']), 'warn');
  await t.throwsAsync(() => levelAfter(['--log-format', 'yaml']), { message: /argument 'yaml' is invalid\. Allowed choices are json, text/ });
});
