/** The settings of `run`'s HTTP servers (`--metrics-bind-address`, `--healthz-bind-address`) and kube-proxy's defaults for them. */
import type { BindAddress, IPPrefix } from '../model/addr.ts';

/** Options of `run`'s HTTP servers: null when turned off. */
export type ServerCliOptions = {
  readonly metricsBindAddress: BindAddress | null;
  readonly healthzBindAddress: BindAddress | null;
  /** `--nodeport-addresses`; absent or empty: every address. */
  readonly nodeportAddresses?: readonly IPPrefix[];
};

/**
 * kube-proxy's defaults for its two servers (`--metrics-bind-address`,
 * `--healthz-bind-address`; pkg/proxy/apis/config/v1alpha1 defaults): the
 * metrics on loopback only, the health check on every address, where a
 * cloud load balancer probes it.
 */
export const DEFAULT_METRICS_BIND_ADDRESS = '127.0.0.1:10249';
export const DEFAULT_HEALTHZ_BIND_ADDRESS = '0.0.0.0:10256';
