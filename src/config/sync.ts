/**
 * The settings of `run` and `sync`: the sync periods and kube-proxy's
 * conntrack settings, on top of the kernel and render settings.
 */
import type { KernelOptions } from './kernel.ts';
import type { RenderCliOptions } from './render-cli.ts';

/** Options of `run` and `sync`. */
export type SyncCliOptions = KernelOptions & RenderCliOptions & Partial<ConntrackCliOptions> & {
  readonly minSyncPeriod: number;
  readonly syncPeriod: number;
  /** `--full-sync-period`, ms (run only). */
  readonly fullSyncPeriod?: number;
};

/** The conntrack settings of `run` and `sync` (conntrack/sysctls.ts), kube-proxy's `conntrack.*`; 0 leaves a setting alone. */
export type ConntrackCliOptions = {
  readonly conntrackMaxPerCore: number;
  readonly conntrackMin: number;
  /** ms, whole seconds. */
  readonly conntrackTcpTimeoutEstablished: number;
  readonly conntrackTcpTimeoutCloseWait: number;
  readonly conntrackUdpTimeout: number;
  readonly conntrackUdpTimeoutStream: number;
};
