/**
 * The command line before commander parses it, so that drover starts where
 * kube-proxy started, with kube-proxy's flags and file:
 *
 * - no command, only flags (`drover --config F --hostname-override N`):
 *   `drover run`, as kube-proxy has no commands; `--cleanup` instead runs
 *   `drover cleanup` in the mode in use;
 * - kube-proxy's flags (kube-proxy-flags.ts) become drover's, are dropped,
 *   or are refused;
 * - `--config FILE` (kube-proxy-fields.ts, config-file.ts) supplies the
 *   defaults of the flags;
 * - with `--config`, `--kubeconfig` or `--master` and no `--source`, the
 *   source is the Kubernetes API, as kube-proxy's always is;
 * - every kube-proxy flag or field set to a value drover cannot honour is
 *   named in one line: an error, or with `--config-unsupported=warn` a
 *   warning, and drover goes on without them.
 */
import type { Command, Option } from 'commander';
import { defaultMode } from '../modes/registry.ts';
import { KUBERNETES_SOURCE } from '../sources/select.ts';
import { applyConfigDefaults, CONFIG_COMMANDS, configArg, flagValue, readConfigFile, refusalText, type Refusal } from './config-file.ts';
import { kubeProxyFlag } from './kube-proxy-flags.ts';
import { UsageError } from '../errors.ts';

/** The program's own flags, which need no command. */
const PROGRAM_FLAGS = new Set(['-h', '--help', '-V', '--version']);

/** The flags that name the mode, drover's and kube-proxy's. */
const MODE_FLAGS = ['--mode', '-m', '--proxy-mode'];

/**
 * The command line `argv` (process.argv: node, script, then the arguments)
 * as drover's commander program takes it (see the module comment), after
 * making the configuration file's values the defaults of the command's
 * flags. Warnings (with `--config-unsupported=warn`) go to `warn`, one line.
 * @throws UsageError naming every kube-proxy flag and field set to a value drover cannot honour (unless warn), or a kube-proxy flag without its value
 * @throws ConfigFileError as readConfigFile and applyConfigDefaults do
 */
export function prepareCommandLine(program: Command, argv: readonly string[], warn: (line: string) => void): string[] {
  let args = argv.slice(2);
  if (args.length > 0 && args[0]!.startsWith('-') && !PROGRAM_FLAGS.has(args[0]!)) args = ['run', ...args];
  const name = args[0];
  const cmd = program.commands.find((c) => c.name() === name);
  if (cmd === undefined || name === undefined) return [...argv];
  let rest = args.slice(1);
  const policy = flagValue(rest, ['--config-unsupported']);
  const path = CONFIG_COMMANDS.includes(name) ? configArg(rest) : undefined;
  const modeFlag = flagValue(rest, MODE_FLAGS);
  const config = path !== undefined ? readConfigFile(path, modeFlag) : undefined;
  const mode = modeFlag ?? config?.mode ?? defaultMode();

  if (name === 'run' && rest.some((a) => a === '--cleanup' || a === '--cleanup=true')) {
    const cleanup = program.commands.find((c) => c.name() === 'cleanup');
    if (cleanup !== undefined) {
      const rewritten = rewriteKubeProxyFlags(cmd, rest, mode);
      return [...argv.slice(0, 2), 'cleanup', ...optionsOf(cleanup, cmd, rewritten.args, ['--mode', '-m']), '--mode', mode];
    }
  }

  const rewritten = rewriteKubeProxyFlags(cmd, rest, mode);
  rest = rewritten.args;
  const hasSource = cmd.options.some((o) => o.long === '--source');
  if (hasSource && flagValue(rest, ['--source', '-s']) === undefined && (path !== undefined || flagValue(rest, ['--kubeconfig', '--master']) !== undefined)) {
    rest = [...rest, '--source', KUBERNETES_SOURCE];
  }
  const fields: Refusal[] = [...(config?.refused ?? [])];
  if (config !== undefined && path !== undefined) {
    const elsewhere = new Set(program.commands.filter((c) => CONFIG_COMMANDS.includes(c.name())).flatMap((c) => c.options.map((o) => o.long ?? '')));
    fields.push(...applyConfigDefaults(cmd, path, config, elsewhere));
  }
  const parts = [...(fields.length > 0 ? [`--config ${path}: ${fields.map(refusalText).join('; ')}`] : []), ...rewritten.refused.map(refusalText)];
  if (parts.length > 0) {
    const line = `not supported by drover: ${parts.join('; ')}`;
    if (policy === 'warn') warn(`drover: ${line}; going on without them (--config-unsupported=warn)`);
    else throw new UsageError(`${line}; to start without them, add --config-unsupported=warn`);
  }
  return [...argv.slice(0, 2), name, ...rest];
}

/** Whether `opt` takes a value that may stand in the next argument. */
const takesValue = (opt: Option): boolean => opt.required || opt.optional;

/**
 * A switch set as pflag writes it: `flag` when on; when off, its negation
 * `--no-NAME` where the command has one (so that `--masquerade-all=false`
 * turns off what `--config` turned on), else nothing (off is the default).
 * `--no-NAME=true` is `--no-NAME`, and `--no-NAME=false` is `--NAME`.
 */
function switchArgs(cmd: Command, flag: string, on: boolean): string[] {
  // A negation given a value (`--no-masquerade-all=false`) is the switch itself, turned the other way.
  const negated = flag.startsWith('--no-');
  const positive = negated ? `--${flag.slice('--no-'.length)}` : flag;
  const negation = `--no-${positive.replace(/^--/, '')}`;
  if (on !== negated) return cmd.options.some((o) => o.long === positive) ? [positive] : [];
  return cmd.options.some((o) => o.long === negation) ? [negation] : [];
}

/**
 * `args` with kube-proxy's flags made drover's for `cmd` (see
 * kube-proxy-flags.ts); `mode` decides the mode-specific ones. A flag `cmd`
 * has itself is left as it is, value included; anything else that is no
 * kube-proxy flag is left for commander to refuse.
 * @returns the arguments and the kube-proxy flags refused
 * @throws UsageError for a kube-proxy flag that needs a value and has none
 */
export function rewriteKubeProxyFlags(cmd: Command, args: readonly string[], mode: string): { args: string[]; refused: Refusal[] } {
  const out: string[] = [];
  const refused: Refusal[] = [];
  const has = (flag: string) => cmd.options.some((o) => o.long === flag);
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') {
      out.push(...args.slice(i));
      break;
    }
    if (!a.startsWith('-') || a === '-') {
      out.push(a);
      continue;
    }
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    const flag = eq > 0 ? a.slice(0, eq) : a;
    const own = cmd.options.find((o) => o.long === flag || o.short === flag);
    if (own !== undefined) {
      // A switch as pflag writes it: --name=true, --name=false.
      if (eq > 0 && !takesValue(own)) {
        const value = a.slice(eq + 1);
        if (value !== 'true' && value !== 'false') throw new UsageError(`${a}: expected true or false`);
        out.push(...switchArgs(cmd, flag, value === 'true'));
        continue;
      }
      out.push(a);
      if (eq < 0 && takesValue(own) && i + 1 < args.length && (own.required || !args[i + 1]!.startsWith('-'))) out.push(args[++i]!);
      continue;
    }
    // klog's -v: "-v 3", "-v3", "-v=3" (and "--v=3", read below as the flag "v").
    const short = /^-v=?(\d+)$/.exec(a);
    const kname = short !== null || a === '-v' ? 'v' : a.startsWith('--') ? flag.slice(2) : undefined;
    const use = kname === undefined ? undefined : kubeProxyFlag(kname);
    if (use === undefined || kname === undefined) {
      out.push(a);
      continue;
    }
    let value: string;
    if (short !== null) value = short[1]!;
    else if (eq > 0) value = a.slice(eq + 1);
    else if (use.switch === true) value = 'true';
    else if (i + 1 < args.length) value = args[++i]!;
    else throw new UsageError(`kube-proxy's flag ${flag} needs a value`);
    const shown = kname === 'v' ? '-v' : flag;
    switch (use.use) {
      case 'same':
      case 'alias': {
        if (use.use === 'alias' && use.modes !== undefined && !use.modes.includes(mode)) break;
        const to = use.use === 'alias' ? use.to : `--${kname}`;
        if (!has(to)) {
          refused.push({ name: shown, value, why: use.use === 'alias' ? `drover ${cmd.name()} has no ${to}, kube-proxy's ${shown}` : `drover ${cmd.name()} has no ${to}` });
          break;
        }
        if (use.switch === true) {
          if (value !== 'true' && value !== 'false') throw new UsageError(`${shown}=${value}: expected true or false`);
          out.push(...switchArgs(cmd, to, value === 'true'));
        } else out.push(to, value);
        break;
      }
      case 'ignored':
        break;
      case 'refused':
        if (use.accept?.(value) !== true) refused.push({ name: shown, value, why: use.why });
        break;
      case 'cleanup':
        refused.push({ name: shown, value, why: `kube-proxy's --cleanup is drover's command: drover cleanup --mode ${mode}` });
        break;
    }
  }
  return { args: out, refused };
}

/** The arguments of `args` (read with `from`'s options) that `to` takes too, values included, but those of `leave`. */
function optionsOf(to: Command, from: Command, args: readonly string[], leave: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const flag = a.startsWith('--') && a.includes('=') ? a.slice(0, a.indexOf('=')) : a;
    const opt = from.options.find((o) => o.long === flag || o.short === flag);
    const value = opt !== undefined && !a.includes('=') && takesValue(opt) ? args[++i] : undefined;
    if (opt === undefined || leave.includes(opt.long ?? '') || !to.options.some((o) => o.long === opt.long)) continue;
    out.push(a, ...(value !== undefined ? [value] : []));
  }
  return out;
}
