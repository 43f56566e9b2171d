/**
 * The settings that come from this node's Node object, as kube-proxy reads
 * them once at start (cmd/kube-proxy/app/server.go newProxyServer and
 * pkg/proxy/node.go NodeManager):
 *
 * - `--detect-local-mode NodeCIDR`: traffic from this node's pods, the
 *   Node's `spec.podCIDRs`, is local; drover renders them where it renders
 *   `--cluster-cidr` (the masquerade rule's `! -s` and the pods'
 *   short-circuit), one per family;
 * - `--nodeport-addresses primary`: the node's primary IPs
 *   (model/node-ips.ts), as /32 and /128.
 *
 * kube-proxy exits when either changes, so that it starts again with the
 * new ones; `drover run` does the same (guardNodeSettings).
 */
import type { IPPrefix } from '../model/addr.ts';
import { primaryNodeIPs, primaryNodePortCIDRs } from '../model/node-ips.ts';
import type { NodeInfo, Snapshot } from '../model/types.ts';
import type { Source, SourceLoad } from '../sources/source.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import { UsageError } from '../errors.ts';

/** The options that may need the Node. */
type NodeFlags = Pick<RenderCliOptions, 'detectLocalMode' | 'nodeportAddresses' | 'bindAddress' | 'clusterCidr' | 'hostnameOverride'>;

/** What the Node settles: the values that replace `--cluster-cidr` and `--nodeport-addresses`. */
export interface NodeSettings {
  readonly clusterCidr?: string;
  readonly nodeportAddresses?: readonly IPPrefix[];
}

/** Whether `opts` ask for a setting from the Node (NodeCIDR, or `--nodeport-addresses primary`). */
export function needsNode(opts: NodeFlags): boolean {
  return opts.detectLocalMode === 'NodeCIDR' || opts.nodeportAddresses?.primary === true;
}

/** How to name this node in a message: "Node NAME", or "this node's Node" when the name is not known. */
const named = (opts: NodeFlags, node: NodeInfo | undefined) => {
  const name = node?.name ?? opts.hostnameOverride;
  return name !== undefined ? `Node ${name}` : "this node's Node";
};

/**
 * The settings `opts` ask the Node for, from `node` (see the module comment).
 * @throws UsageError naming the flag and the Node: no Node in the source,
 *   no `spec.podCIDRs` (NodeCIDR), or no InternalIP or ExternalIP and no
 *   `--bind-address` (primary).
 */
export function nodeSettings(opts: NodeFlags, node: NodeInfo | undefined): NodeSettings {
  const described = node !== undefined && node.nameOnly !== true;
  let clusterCidr: string | undefined;
  let nodeportAddresses: IPPrefix[] | undefined;
  if (opts.detectLocalMode === 'NodeCIDR') {
    if (!described) throw new UsageError(`--detect-local-mode NodeCIDR: the source does not describe ${named(opts, node)}, whose spec.podCIDRs it needs`);
    if (node.podCIDRs === undefined || node.podCIDRs.length === 0) throw new UsageError(`--detect-local-mode NodeCIDR: ${named(opts, node)} has no spec.podCIDRs`);
    clusterCidr = node.podCIDRs.join(',');
  }
  if (opts.nodeportAddresses?.primary === true) {
    if (!described && (opts.bindAddress ?? []).length === 0) throw new UsageError(`--nodeport-addresses primary: the source does not describe ${named(opts, node)}, whose addresses it needs, and no --bind-address is given`);
    nodeportAddresses = primaryNodePortCIDRs(primaryNodeIPs(described ? node : undefined, opts.bindAddress));
    if (nodeportAddresses.length === 0) throw new UsageError(`--nodeport-addresses primary: ${named(opts, node)} has no InternalIP or ExternalIP (status.addresses) and no --bind-address is given`);
  }
  return { ...(clusterCidr !== undefined ? { clusterCidr } : {}), ...(nodeportAddresses !== undefined ? { nodeportAddresses } : {}) };
}

/** `opts` with the settings of `node` in place (see nodeSettings); `opts` itself when it asks for none. @throws UsageError as nodeSettings does. */
export function withNodeSettings<T extends NodeFlags>(opts: T, node: NodeInfo | undefined): T {
  return needsNode(opts) ? { ...opts, ...nodeSettings(opts, node) } : opts;
}

/** What differs between two settings, as a message; undefined when they are the same. */
function difference(before: NodeSettings, after: NodeSettings): string | undefined {
  const cidrs = (s: NodeSettings) => (s.nodeportAddresses ?? []).map((c) => c.text).join(',');
  if (before.clusterCidr !== after.clusterCidr) return `its spec.podCIDRs changed from ${before.clusterCidr} to ${after.clusterCidr}`;
  if (cidrs(before) !== cidrs(after)) return `its primary IPs changed from ${cidrs(before)} to ${cidrs(after)}`;
  return undefined;
}

/**
 * `source`, watched for a change of the settings `opts` took from the Node
 * (`settings`): the first read whose Node settles them otherwise (or no
 * longer settles them) is refused, so nothing is synced with them, and
 * `onChange` is told why, once, as kube-proxy exits then.
 */
export function guardNodeSettings(source: Source, opts: NodeFlags, settings: NodeSettings, onChange: (why: string) => void): Source {
  let told = false;
  const check = (snapshot: Snapshot): void => {
    let why: string | undefined;
    try {
      why = difference(settings, nodeSettings(opts, snapshot.node));
    } catch (err) {
      why = (err as Error).message;
    }
    if (why === undefined) return;
    const message = `${named(opts, snapshot.node)}: ${why}; drover stops so that it starts again with them, as kube-proxy does`;
    if (!told) onChange(message);
    told = true;
    throw new UsageError(message);
  };
  return {
    async load(o?: { readonly full?: boolean }): Promise<SourceLoad> {
      const loaded = await source.load(o);
      check(loaded.snapshot);
      return loaded;
    },
    watch: (onSourceChange: () => void) => source.watch(onSourceChange),
    close: () => source.close(),
  };
}
