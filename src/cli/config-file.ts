/**
 * `--config FILE`: kube-proxy's configuration file, a KubeProxyConfiguration
 * of `kubeproxy.config.k8s.io/v1alpha1` (YAML or JSON), for `run` and
 * `sync`, so that a node can swap kube-proxy for drover and keep its file.
 *
 * The file is read strictly, field by field, from the table of
 * kube-proxy-fields.ts: a field drover uses becomes the default of the flag
 * of the same meaning (so a flag given on the command line overrides the
 * file), through that flag's own parser; a field with no effect on drover
 * is accepted quietly; a value drover cannot honour is refused, one line
 * naming each such field (prepareCommandLine decides whether that stops
 * drover); a field kube-proxy does not have is an error naming it, with the
 * field it was probably meant to be. Field names and meanings: kube-proxy's
 * staging/src/k8s.io/kube-proxy/config/v1alpha1/types.go.
 */
import { readFileSync } from 'node:fs';
import { Option as OptionClass, type Command, type Option } from 'commander';
import { parse as parseYaml } from 'yaml';
import { DroverError } from '../errors.ts';
import { defaultMode } from '../modes/registry.ts';
import { closest } from '../util/similar.ts';
import { FIELDS, SECTIONS, fieldRule, type FieldRule } from './kube-proxy-fields.ts';

/** The only apiVersion and kind accepted. */
export const CONFIG_API_VERSION = 'kubeproxy.config.k8s.io/v1alpha1';
export const CONFIG_KIND = 'KubeProxyConfiguration';

/** A configuration file that cannot be used: names the file and, when it is one field's fault, the field. */
export class ConfigFileError extends DroverError {
  constructor(path: string, field: string | undefined, message: string) {
    super(`--config ${path}: ${field === undefined ? '' : `${field}: `}${message}`);
    this.name = 'ConfigFileError';
  }
}

/** A field (or flag) set to a value drover cannot honour. */
export interface Refusal {
  /** The field's dotted path (or the flag, e.g. "--ipvs-strict-arp"). */
  readonly name: string;
  /** The value as set, for the message. */
  readonly value: unknown;
  /** What drover does instead. */
  readonly why: string;
}

/** "field: value (why)", one refusal in a message. */
export function refusalText(r: Refusal): string {
  const value = typeof r.value === 'string' ? r.value : JSON.stringify(r.value);
  return `${r.name}${value === undefined || value === 'true' ? '' : `=${value}`} (${r.why})`;
}

/** What a configuration file sets. */
export interface ConfigValues {
  /** Flag (e.g. "--cluster-cidr") → the value for that flag's parser (a boolean for a switch), with the field it came from. */
  readonly flags: ReadonlyMap<string, { readonly field: string; readonly value: string | boolean }>;
  /** Fields set to a value drover cannot honour, in file order. */
  readonly refused: readonly Refusal[];
  /** The file's `mode`, when set. */
  readonly mode?: string;
}

/**
 * Read a KubeProxyConfiguration strictly (see the module comment). A zero
 * value (`""`, `0`, `"0s"`, `false`, `[]`, `{}`) counts as not set, as in
 * kube-proxy's defaulting, and for a pointer field only `null` does; so
 * the file kubeadm writes is read as kube-proxy reads it. `modeFlag` is the
 * mode given on the command line, which wins over the file's (and without
 * either, the registry's default mode): it decides which mode's section applies.
 * @throws ConfigFileError for a file that cannot be read or parsed, a wrong
 *   apiVersion or kind, unknown fields (all named, each with the field it
 *   was probably meant to be), or a field of the wrong shape.
 */
export function readConfigFile(path: string, modeFlag?: string): ConfigValues {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigFileError(path, undefined, `cannot read it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigFileError(path, undefined, `not YAML or JSON: ${(err as Error).message.split('\n')[0]!.replace(/:$/, '')}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new ConfigFileError(path, undefined, 'expected a KubeProxyConfiguration object');
  const root = doc as Record<string, unknown>;
  if (root.apiVersion !== CONFIG_API_VERSION) throw new ConfigFileError(path, 'apiVersion', `expected ${CONFIG_API_VERSION}, got ${JSON.stringify(root.apiVersion)}`);
  if (root.kind !== CONFIG_KIND) throw new ConfigFileError(path, 'kind', `expected ${CONFIG_KIND}, got ${JSON.stringify(root.kind)}`);

  const { set, unknown } = readFields(path, root);
  if (unknown.length > 0) {
    throw new ConfigFileError(path, undefined, `not a field of ${CONFIG_KIND} ${CONFIG_API_VERSION}: ${unknown.map((u) => `${u}${hint(u)}`).join('; ')}`);
  }
  const fileMode = typeof root.mode === 'string' && root.mode !== '' ? root.mode : undefined;
  const mode = modeFlag ?? fileMode ?? defaultMode();
  const flags = new Map<string, { field: string; value: string | boolean }>();
  const refused: Refusal[] = [];
  for (const [field, { rule }, value] of set) {
    if (rule.use === 'ignored' || (rule.modes !== undefined && !rule.modes.includes(mode))) continue;
    if (rule.use === 'refused') {
      if (rule.accept?.(value) !== true) refused.push({ name: field, value, why: rule.why });
      continue;
    }
    const why = rule.refuse?.(value);
    if (why !== undefined) {
      refused.push({ name: field, value, why });
      continue;
    }
    try {
      flags.set(rule.flag, { field, value: rule.text(value) });
    } catch (err) {
      throw new ConfigFileError(path, field, (err as Error).message);
    }
  }
  return { flags, refused, ...(fileMode !== undefined ? { mode: fileMode } : {}) };
}

/** A value kube-proxy's defaulting reads as not set (see readConfigFile). */
function unset(value: unknown, rule: FieldRule): boolean {
  if (value === null || value === undefined) return true;
  if (rule.pointer === true) return false;
  if (value === '' || value === 0 || value === '0' || value === false || value === '0s') return true;
  if (Array.isArray(value)) return value.length === 0;
  return typeof value === 'object' && Object.keys(value).length === 0;
}

/**
 * The fields set in `root`, in file order, with their rules, and the dotted
 * paths of the keys that are no field: a key whose value is a section of
 * unknown name is named by its own fields (`iptable.syncPeriod`).
 * @throws ConfigFileError for a section that is not an object.
 */
function readFields(path: string, root: Record<string, unknown>): { set: Array<[string, FieldRule, unknown]>; unknown: string[] } {
  const set: Array<[string, FieldRule, unknown]> = [];
  const unknown: string[] = [];
  const walk = (o: Record<string, unknown>, prefix: string, known: boolean) => {
    for (const [k, v] of Object.entries(o)) {
      const field = prefix === '' ? k : `${prefix}.${k}`;
      const rule = known ? fieldRule(field) : undefined;
      if (rule !== undefined) {
        if (!unset(v, rule)) set.push([field, rule, v]);
        continue;
      }
      const section = known && SECTIONS.has(field);
      if (section && (v === null || v === undefined)) continue;
      if (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length > 0) {
        walk(v as Record<string, unknown>, field, section);
        continue;
      }
      if (section) throw new ConfigFileError(path, field, `expected a section of fields, got ${JSON.stringify(v)}`);
      unknown.push(field);
    }
  };
  walk(root, '', true);
  return { set, unknown };
}

/** " (did you mean iptables.syncPeriod?)" for an unknown field, when a field is close to it or ends like it; "" otherwise. */
function hint(field: string): string {
  const near = closest(field, Object.keys(FIELDS));
  if (near !== undefined) return ` (did you mean ${near}?)`;
  const last = field.slice(field.lastIndexOf('.') + 1);
  const alike = Object.keys(FIELDS).filter((f) => f.endsWith(`.${last}`) || f === last);
  return alike.length > 0 ? ` (did you mean ${alike.join(' or ')}?)` : '';
}

/**
 * The value of `--config` in a command's arguments (`--config F` or
 * `--config=F`), read before commander parses them so that the file can
 * supply the defaults of the other flags; undefined when absent.
 */
export function configArg(args: readonly string[]): string | undefined {
  return flagValue(args, ['--config']);
}

/** The value of the first of `names` (`--name V`, `--name=V`, `-m V`) in `args`, before any `--`; undefined when absent. */
export function flagValue(args: readonly string[], names: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') return undefined;
    if (names.includes(a)) return args[i + 1];
    const long = names.find((n) => n.startsWith('--') && a.startsWith(`${n}=`));
    if (long) return a.slice(long.length + 1);
  }
  return undefined;
}

/**
 * Make the file's values the defaults of `cmd`'s flags, through each flag's
 * parser (so a flag on the command line still wins). A field whose flag the
 * command does not have is left alone when `elsewhere` has it (a flag of
 * `run` only, such as --metrics-bind-address, given to `sync`), and when no
 * command has it, it is refused unless drover honours its value anyway
 * (FieldUse.withoutFlag: `logging.format: json`).
 * @returns the fields refused that way.
 * @throws ConfigFileError naming the field whose value the flag's parser refuses.
 */
export function applyConfigDefaults(cmd: Command, path: string, values: ConfigValues, elsewhere: ReadonlySet<string> = new Set()): Refusal[] {
  const refused: Refusal[] = [];
  for (const [flag, { field, value }] of values.flags) {
    const opt: Option | undefined = cmd.options.find((o) => o.long === flag);
    if (!opt) {
      const rule = fieldRule(field)?.rule;
      const honoured = rule?.use === 'flag' && rule.withoutFlag?.(value) === true;
      if (!elsewhere.has(flag) && !honoured) refused.push({ name: field, value, why: `drover has no ${flag}` });
      continue;
    }
    let parsed: unknown = value;
    try {
      if (typeof value === 'string' && opt.parseArg) parsed = opt.parseArg(value, opt.defaultValue);
    } catch (err) {
      throw new ConfigFileError(path, field, (err as Error).message);
    }
    // Commander copied the old default into the command when the option was added: set both.
    opt.default(parsed, `${String(value)} (from --config)`);
    cmd.setOptionValueWithSource(opt.attributeName(), parsed, 'default');
    let fields = FROM_CONFIG.get(cmd);
    if (!fields) FROM_CONFIG.set(cmd, (fields = new Map()));
    fields.set(flag, { path, field });
  }
  return refused;
}

/** Per command: flag → the file and field that set its default (applyConfigDefaults). */
const FROM_CONFIG = new WeakMap<Command, Map<string, { path: string; field: string }>>();

/**
 * How an error about the value of `flag` (e.g. "--sync-period") should name
 * it: "--config PATH: iptables.syncPeriod" when the value in effect came
 * from the configuration file (no flag on the command line overrode it),
 * else the flag itself.
 */
export function settingName(cmd: Command, flag: string): string {
  const opt = cmd.options.find((o) => o.long === flag);
  const from = FROM_CONFIG.get(cmd)?.get(flag);
  if (!opt || !from || cmd.getOptionValueSource(opt.attributeName()) !== 'default') return flag;
  return `--config ${from.path}: ${from.field}`;
}

/** `--config FILE`, for `run` and `sync`. */
export function configOption(): Option {
  return new OptionClass('--config <file>', `kube-proxy's configuration file (${CONFIG_KIND}, ${CONFIG_API_VERSION}); flags override it`);
}

/** The commands that take `--config`. */
export const CONFIG_COMMANDS: readonly string[] = ['run', 'sync'];

/** `--config-unsupported`'s values: stop at a kube-proxy setting drover cannot honour, or warn and go on without it. */
export const UNSUPPORTED_POLICIES = ['error', 'warn'] as const;

/** `--config FILE` and `--config-unsupported`, for `run` and `sync`. */
export function configOptions(): Option[] {
  return [
    configOption(),
    new OptionClass(
      '--config-unsupported <policy>',
      'a kube-proxy flag or configuration field set to a value drover cannot honour: error stops with one line naming each, warn names them and goes on without them',
    )
      .choices([...UNSUPPORTED_POLICIES])
      .default('error'),
  ];
}
