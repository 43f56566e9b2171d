/**
 * `--config FILE`: kube-proxy's configuration file, a KubeProxyConfiguration
 * of `kubeproxy.config.k8s.io/v1alpha1` (YAML or JSON), for `run` and
 * `sync`, so that a node can swap kube-proxy for drover and keep its file.
 *
 * Each field drover has becomes the default of the flag of the same
 * meaning, so a flag given on the command line overrides the file; values
 * go through that flag's own parser, and an error names the file and the
 * field. A field drover does not support, or does not know, is named once
 * in one warning line and otherwise ignored. Field names and meanings:
 * kube-proxy's pkg/proxy/apis/config/types.go and its v1alpha1 package.
 */
import { readFileSync } from 'node:fs';
import { Option as OptionClass, type Command, type Option } from 'commander';
import { parse as parseYaml } from 'yaml';
import { DroverError } from '../errors.ts';

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

/** How one field of the file becomes a flag's value. */
interface FieldRule {
  /** The flag it sets, e.g. "--cluster-cidr". */
  readonly flag: string;
  /** The text the flag's parser takes, from the field's value; throws Error for a value of the wrong shape. */
  readonly text: (value: unknown) => string | boolean;
}

const str = (v: unknown): string => {
  if (typeof v !== 'string') throw new Error(`expected a string, got ${JSON.stringify(v)}`);
  return v;
};
const bool = (v: unknown): boolean => {
  if (typeof v !== 'boolean') throw new Error(`expected true or false, got ${JSON.stringify(v)}`);
  return v;
};
/** A list of strings. */
const list = (v: unknown): string[] => {
  if (!Array.isArray(v) || v.some((e) => typeof e !== 'string')) throw new Error(`expected a list of strings, got ${JSON.stringify(v)}`);
  return v as string[];
};
/** A Go duration ("30s", "1m0s", "500ms", "1h2m3.5s") as the flags' "Nms". */
const duration = (v: unknown): string => `${goDurationMs(str(v))}ms`;
/** kube-proxy accepts "IP" alone for its bind addresses and adds the default port. */
const bindAddress = (defaultPort: number) => (v: unknown): string => {
  const s = str(v).trim();
  if (s === '') return '';
  if (/^[0-9.]+$/.test(s)) return `${s}:${defaultPort}`;
  if (/^[0-9A-Fa-f:]+$/.test(s) && s.includes(':') && !/\]:/.test(s)) return `[${s}]:${defaultPort}`;
  return s;
};

/**
 * The fields drover has. Sync periods may stand at the top level (newer
 * kube-proxy) or in the section of the mode in use (`iptables.syncPeriod`
 * with mode iptables, `ipvs.syncPeriod` with mode ipvs, …); the top level wins.
 */
const FIELDS: Readonly<Record<string, FieldRule>> = {
  mode: { flag: '--mode', text: str },
  clusterCIDR: { flag: '--cluster-cidr', text: str },
  hostnameOverride: { flag: '--hostname-override', text: str },
  metricsBindAddress: { flag: '--metrics-bind-address', text: bindAddress(10249) },
  healthzBindAddress: { flag: '--healthz-bind-address', text: bindAddress(10256) },
  nodePortAddresses: { flag: '--nodeport-addresses', text: (v) => list(v).join(',') },
  'clientConnection.kubeconfig': { flag: '--kubeconfig', text: str },
  syncPeriod: { flag: '--sync-period', text: duration },
  minSyncPeriod: { flag: '--min-sync-period', text: duration },
  'iptables.masqueradeAll': { flag: '--masquerade-all', text: bool },
  'ipvs.scheduler': { flag: '--ipvs-scheduler', text: str },
};

/**
 * kube-proxy's `iptables.localhostNodePorts`, drover's `--nodeport-localhost`
 * (iptables mode only). kube-proxy takes an absent field as true; drover, as
 * its flag, as false: only `true` turns it on.
 */
const LOCALHOST_FIELD = 'iptables.localhostNodePorts';

/** Per-mode sections whose sync periods apply when that mode is in use. */
const MODE_SECTIONS = ['iptables', 'ipvs', 'nftables'] as const;

/** Fields that are read and need no flag: the header, and values equal to what drover does anyway. */
const IGNORED = new Set(['apiVersion', 'kind']);

/** What a configuration file sets: flag → text for its parser, and the fields drover does not support. */
export interface ConfigValues {
  /** Flag (e.g. "--cluster-cidr") → the value for that flag's parser (a boolean for a switch), with the field it came from. */
  readonly flags: ReadonlyMap<string, { readonly field: string; readonly value: string | boolean }>;
  /** Dotted paths of fields set in the file that drover does not support, each once, in file order. */
  readonly unsupported: readonly string[];
}

/**
 * Read a KubeProxyConfiguration. Empty values (`""`, `0`, `"0s"`,
 * `false`, `null`, `[]`, `{}`) count as not set, as in kube-proxy's
 * defaulting, so the file kubeadm writes is read as kube-proxy reads it.
 * `mode` is the mode in use (a `--mode` flag wins over the file's).
 * @throws ConfigFileError for a file that cannot be read or parsed, a wrong apiVersion or kind, or a field of the wrong shape.
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

  const leaves = setLeaves(root);
  const mode = modeFlag ?? (typeof root.mode === 'string' && root.mode !== '' ? root.mode : 'iptables');
  const flags = new Map<string, { field: string; value: string | boolean }>();
  const unsupported: string[] = [];
  const take = (field: string, rule: FieldRule, value: unknown) => {
    if (flags.has(rule.flag)) return;
    try {
      flags.set(rule.flag, { field, value: rule.text(value) });
    } catch (err) {
      throw new ConfigFileError(path, field, (err as Error).message);
    }
  };
  for (const [field, value] of leaves) {
    if (IGNORED.has(field)) continue;
    const rule = Object.hasOwn(FIELDS, field) ? FIELDS[field] : undefined;
    if (field === 'nodePortAddresses' && Array.isArray(value) && value.includes('primary')) {
      // kube-proxy's "primary" (the node's primary IPs) is not taken: named as unsupported, and every address is used.
      unsupported.push(`${field} (primary)`);
      continue;
    }
    if (rule) {
      take(field, rule, value);
      continue;
    }
    const section = MODE_SECTIONS.find((m) => field === `${m}.syncPeriod` || field === `${m}.minSyncPeriod`);
    if (section !== undefined) {
      // The active mode's section applies (after the top level); another mode's is unused, as in kube-proxy.
      if (section === mode && !leaves.has(field.slice(section.length + 1))) take(field, FIELDS[field.slice(section.length + 1)]!, value);
      continue;
    }
    if (field === LOCALHOST_FIELD) {
      // kube-proxy reads it in iptables mode only; drover's flag is a usage error in the other modes, so the field is named as unused there.
      if (mode === 'iptables') take(field, { flag: '--nodeport-localhost', text: bool }, value);
      else unsupported.push(`${field} (mode ${mode})`);
      continue;
    }
    const unused = MODE_SECTIONS.find((m) => m !== 'iptables' && field === `${m}.masqueradeAll`);
    if (unused !== undefined && unused === mode) {
      take(field, FIELDS['iptables.masqueradeAll']!, value);
      continue;
    }
    unsupported.push(field);
  }
  return { flags, unsupported };
}

/**
 * The fields set in `root`, as dotted paths to their values (a map of
 * objects is walked; a list or a scalar is a leaf). Empty values are left
 * out.
 */
function setLeaves(root: Record<string, unknown>): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const walk = (o: Record<string, unknown>, prefix: string) => {
    for (const [k, v] of Object.entries(o)) {
      const path = prefix === '' ? k : `${prefix}.${k}`;
      // kube-proxy's defaulting: a zero, false or empty value is not set (kubeadm writes `syncPeriod: 0s`, `masqueradeBit: null`, …).
      if (v === null || v === '' || v === 0 || v === '0' || v === false || v === '0s' || (Array.isArray(v) && v.length === 0)) continue;
      if (typeof v === 'object' && !Array.isArray(v)) walk(v as Record<string, unknown>, path);
      else out.set(path, v);
    }
  };
  walk(root, '');
  return out;
}

/**
 * A Go duration (time.ParseDuration: "300ms", "1.5h", "2h45m", "1m0s"), in
 * whole milliseconds.
 * @throws Error for anything else, or a negative duration.
 */
export function goDurationMs(text: string): number {
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  if (text === '0') return 0;
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(text)) throw new Error(`${JSON.stringify(text)} is not a duration (e.g. 30s, 1m0s, 500ms)`);
  let ms = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * units[m[2]!]!;
  return Math.round(ms);
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
function flagValue(args: readonly string[], names: readonly string[]): string | undefined {
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
 * `run` only, such as --metrics-bind-address, given to `sync`), and else
 * reported as unsupported.
 * @returns the fields drover does not support, for one warning line.
 * @throws ConfigFileError naming the field whose value the flag's parser refuses.
 */
export function applyConfigDefaults(cmd: Command, path: string, values: ConfigValues, elsewhere: ReadonlySet<string> = new Set()): string[] {
  const unsupported = [...values.unsupported];
  for (const [flag, { field, value }] of values.flags) {
    const opt: Option | undefined = cmd.options.find((o) => o.long === flag);
    if (!opt) {
      if (!elsewhere.has(flag)) unsupported.push(field);
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
  return unsupported;
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

/**
 * Before `program` parses `argv`: when the command is one of
 * {@link CONFIG_COMMANDS} and has `--config`, make the file's values its
 * flags' defaults, and warn once on stderr about the fields drover does not
 * support.
 * @throws ConfigFileError (see readConfigFile, applyConfigDefaults).
 */
export function loadConfigFor(program: Command, argv: readonly string[], warn: (line: string) => void): void {
  const args = argv.slice(2);
  const name = args[0];
  const cmd = program.commands.find((c) => c.name() === name);
  if (!cmd || !CONFIG_COMMANDS.includes(cmd.name())) return;
  const path = configArg(args.slice(1));
  if (path === undefined) return;
  const elsewhere = new Set(program.commands.filter((c) => CONFIG_COMMANDS.includes(c.name())).flatMap((c) => c.options.map((o) => o.long ?? '')));
  const unsupported = applyConfigDefaults(cmd, path, readConfigFile(path, flagValue(args.slice(1), ['--mode', '-m'])), elsewhere);
  if (unsupported.length > 0) warn(`drover: --config ${path}: not supported by drover, ignored: ${unsupported.join(', ')}`);
}
