/**
 * Which source a `--source` value names, in one table: `kubernetes` names
 * the Kubernetes API server (sources/kubernetes/); a value with a source
 * scheme (`shepherd+http://HOST:PORT`, `shepherd+https://HOST:PORT`) names
 * that source; anything else is a manifest file or folder.
 */
import type { DnsCliOptions } from '../config/dns.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import type { Logger } from '../util/log.ts';
import { DEFAULT_STATE_DIR } from './defaults.ts';
import type { AllocationMemory } from './decoder.ts';
import { SHEPHERD_SCHEME, shepherdBaseURL } from './shepherd-api.ts';
import type { Source } from './source.ts';

/**
 * The `--source` value of the Kubernetes API. Its source (sources/kubernetes/,
 * with the 1,900 modules of the Kubernetes client) is imported only when
 * asked for: every other command and source starts without it.
 */
export const KUBERNETES_SOURCE = 'kubernetes';

/**
 * What a source is made from: the source settings of the render section
 * (`--poll-interval` among them, for the sources that poll), and
 * `--dns-address` of the DNS section, with which the Kubernetes source also
 * receives what only DNS needs.
 */
export type SourceOptions = RenderCliOptions & Pick<DnsCliOptions, 'dnsAddress'>;

/** What {@link createSource} hands each kind of source. */
interface SourceContext {
  readonly logger: Logger;
  readonly allocations: AllocationMemory;
}

/** One kind of source: which `--source` values it takes, and how it is made. */
interface SourceKind {
  readonly name: 'file' | 'shepherd' | 'kubernetes';
  readonly matches: (value: string) => boolean;
  readonly create: (opts: SourceOptions, ctx: SourceContext) => Source | Promise<Source>;
}

/** Every kind of source, the first that matches wins (so the file source, which takes any value, is last). */
const SOURCE_KINDS: readonly SourceKind[] = [
  {
    name: 'kubernetes',
    matches: (value) => value === KUBERNETES_SOURCE,
    // Kubernetes Services carry their ClusterIPs: nothing to allocate or remember.
    create: async (opts, ctx) => (await import('./kubernetes/create.ts')).createKubernetesSource(opts, ctx.logger),
  },
  {
    name: 'shepherd',
    matches: (value) => value.toLowerCase().startsWith(SHEPHERD_SCHEME),
    create: async (opts, ctx) =>
      new (await import('./shepherd.ts')).ShepherdSource({
        baseURL: shepherdBaseURL(opts.source),
        serviceCIDR: opts.serviceCidr,
        nodePortRange: opts.serviceNodePortRange,
        logger: ctx.logger,
        token: shepherdToken(),
        ...(opts.pollInterval !== undefined ? { pollIntervalMs: opts.pollInterval } : {}),
        allocations: ctx.allocations,
      }),
  },
  {
    name: 'file',
    matches: () => true,
    create: async (opts, ctx) =>
      new (await import('./file.ts')).FileSource(opts.source, {
        serviceCIDR: opts.serviceCidr,
        nodePortRange: opts.serviceNodePortRange,
        logger: ctx.logger,
        allocations: ctx.allocations,
        ...(opts.hostnameOverride !== undefined ? { nodeName: opts.hostnameOverride } : {}),
        ...(opts.fileSettle !== undefined ? { settleMs: opts.fileSettle } : {}),
        followExternalLinks: opts.fileFollowExternalLinks === true,
      }),
  },
];

/** The kind of source `value` (a `--source`) names: "file" for a manifest path. */
export function sourceKind(value: string): SourceKind['name'] {
  return SOURCE_KINDS.find((k) => k.matches(value))!.name;
}

/**
 * The source `opts.source` names, with the allocation state file of
 * `opts.stateDir` (default /var/lib/drover): rewritten when `persist` (the
 * commands that program the kernel), only read otherwise.
 * @throws Error when the service CIDR or a source URL is invalid.
 */
export async function createSource(opts: SourceOptions, logger: Logger, { persist }: { persist: boolean }): Promise<Source> {
  // Each source's modules (and the state file's) are loaded here, when one is made: a command that makes none starts without them.
  const { AllocationStateFile } = await import('./allocation-state.ts');
  const allocations = AllocationStateFile.open(opts.stateDir ?? DEFAULT_STATE_DIR, { logger, writable: persist });
  return await SOURCE_KINDS.find((k) => k.matches(opts.source))!.create(opts, { logger, allocations });
}

/** SHEPHERD_API_TOKEN, trimmed as Shepherd trims it; undefined when unset or empty. */
function shepherdToken(): string | undefined {
  const token = process.env.SHEPHERD_API_TOKEN?.trim();
  return token === undefined || token === '' ? undefined : token;
}
