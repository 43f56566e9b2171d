/**
 * `drover takeover`, step 1: what proxy state a network namespace holds.
 * Each mode's driver answers for its own state (ModeDriver.survey, through
 * the registry); kube-proxy's nftables mode, which drover does not
 * implement, is found by its tables' names (`table ip kube-proxy`,
 * `table ip6 kube-proxy`: pkg/proxy/nftables/proxier.go kubeProxyTable).
 */
import { runCommand } from '../kernel/exec.ts';
import type { BackendConfig, ModeOptions, ModeSurvey } from '../modes/driver.ts';
import { allModes } from '../modes/registry.ts';
import { NFT } from '../modes/nftables/exec.ts';

/** One mode's part of a {@link NodeSurvey}. */
export interface ModeFinding extends ModeSurvey {
  /** The mode's `--mode` value. */
  readonly mode: string;
  /** How prose names it ("IPVS"). */
  readonly title: string;
}

/** What a namespace holds, mode by mode. */
export interface NodeSurvey {
  /** Every mode of the registry, in its order. */
  readonly modes: readonly ModeFinding[];
  /** kube-proxy's nftables tables present, as nft names them ("ip kube-proxy", "ip6 kube-proxy"). */
  readonly kubeProxyTables: readonly string[];
}


/** kube-proxy's nftables table name, in both families. */
export const KUBE_PROXY_TABLES: readonly string[] = ['ip kube-proxy', 'ip6 kube-proxy'];

/**
 * Which of {@link KUBE_PROXY_TABLES} `nft list tables` prints, in its output
 * ("table ip kube-proxy" lines). Pure.
 */
export function kubeProxyTablesIn(listing: string): string[] {
  const present = new Set(listing.split('\n').map((l) => l.trim().replace(/^table /, '')));
  return KUBE_PROXY_TABLES.filter((t) => present.has(t));
}

/**
 * Survey the namespace of `opts.netns` (drover's own without it): every
 * mode's driver (given `render`, the render settings of the modes'
 * cleanup), then `nft list tables` for kube-proxy's.
 * @throws what a driver's survey throws (UsageError when not root or the
 *   namespace does not exist); CommandError when nft cannot list the tables.
 */
export async function surveyNode(opts: ModeOptions, render: BackendConfig['render'] = {}): Promise<NodeSurvey> {
  const modes: ModeFinding[] = [];
  for (const driver of allModes()) modes.push({ mode: driver.name, title: driver.title, ...(await driver.survey(opts, render)) });
  const listed = await runCommand(NFT, ['list', 'tables'], opts.netns !== undefined ? { netns: opts.netns } : {});
  if (listed.code !== 0) throw new Error(`nft list tables failed: ${listed.stderr.trim()}`);
  return { modes, kubeProxyTables: kubeProxyTablesIn(listed.stdout) };
}
