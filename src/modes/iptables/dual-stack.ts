/**
 * iptables mode for both IP families (shared/dual-stack.ts): one
 * IptablesBackend per family, each fed its family's view of the snapshot
 * (model/family.ts) and writing through its own restore command
 * (`iptables-restore` and `ip6tables-restore`, both `--noflush`). The
 * IPv6 family wakes up for IPv6 service ports, or for drover's
 * KUBE-SERVICES chain found in the IPv6 nat table; a failure in one family
 * never stops the other (kube-proxy issue 73157).
 */
import type { ModeSyncDetail } from '../../proxier/backend.ts';
import type { Logger } from '../../util/log.ts';
import { DualStackBackend } from '../shared/dual-stack.ts';
import { IptablesBackend } from './backend.ts';
import type { IptablesExec } from '../../kernel/iptables/exec.ts';
import type { RenderOptions } from '../../config/render.ts';
import type { StaticRuleset } from '../shared/kube-chains/static.ts';
import { iptablesDetail, isIptablesDetail } from './sync-detail.ts';

/** One family's part of a {@link DualStackIptablesBackend}. */
export interface FamilyPart {
  readonly exec: IptablesExec;
  readonly render: RenderOptions;
  readonly statics: StaticRuleset;
}

/** Options of {@link DualStackIptablesBackend}: each family's I/O, render options (the IPv6 ones with `family: 'IPv6'`) and static rules. */
export interface DualStackOptions {
  readonly IPv4: FamilyPart;
  readonly IPv6: FamilyPart;
  readonly logger: Logger;
  /** As IptablesBackendOptions.maxLinesPerTransaction, for each family. */
  readonly maxLinesPerTransaction?: number;
}

export { FamilySyncError } from '../shared/dual-stack.ts';

/** iptables mode's Backend for both families (see the module comment). */
export class DualStackIptablesBackend extends DualStackBackend {
  constructor(opts: DualStackOptions) {
    const make = (p: FamilyPart) =>
      new IptablesBackend({
        exec: p.exec,
        render: p.render,
        statics: p.statics,
        logger: opts.logger,
        ...(opts.maxLinesPerTransaction !== undefined ? { maxLinesPerTransaction: opts.maxLinesPerTransaction } : {}),
      });
    super({
      mode: 'iptables',
      backends: { IPv4: make(opts.IPv4), IPv6: make(opts.IPv6) },
      logger: opts.logger,
      // True when the IPv6 nat table holds drover's KUBE-SERVICES chain.
      ipv6HasState: async () => (await opts.IPv6.exec.listChain('nat', 'KUBE-SERVICES')) !== undefined,
      mergeDetail: mergeIptablesDetail,
    });
  }
}

/** Both families' iptables details: rule counts added. */
function mergeIptablesDetail(a: ModeSyncDetail | undefined, b: ModeSyncDetail | undefined): ModeSyncDetail | undefined {
  if (!isIptablesDetail(a) || !isIptablesDetail(b)) return a;
  return iptablesDetail({
    rules: { filter: a.rules.filter + b.rules.filter, nat: a.rules.nat + b.rules.nat },
    written: { filter: a.written.filter + b.written.filter, nat: a.written.nat + b.written.nat },
  });
}
