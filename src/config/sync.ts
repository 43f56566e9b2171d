/** kube-proxy's conntrack settings of `run` and `sync` (ProxyConfig.conntrack). */

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
