/**
 * Wire formats shared by the testbed library and the helper scripts it runs
 * inside namespaces (echo-server.mjs, probe-cli.mjs, via JSDoc). Types only.
 */

/** The JSON body of every echo-server response. */
export interface EchoReply {
  /** Backend name (from the topology spec). */
  backend: string;
  /** Backend address the server was configured with. */
  ip: string;
  /** Port the request arrived on. */
  port: number;
  /** Source address of the connection as the backend saw it (post-NAT). */
  client: string;
  /** Source port of the connection as the backend saw it. */
  clientPort: number;
}

/** Outcome of one request: the echo reply, or an error code (ECONNREFUSED, ETIMEDOUT, ...). */
export type RequestResult = { ok: true; reply: EchoReply } | { ok: false; code: string };

/** Input of `probe-cli.mjs` (JSON on stdin) in `probe` mode. */
export interface ProbeRequest {
  host: string;
  port: number;
  /** Number of sequential requests, each on a new TCP connection. */
  count: number;
  /** Per-request deadline (connect + response), in ms. */
  timeoutMs: number;
}

/** Output of `probe-cli.mjs` in `probe` mode (JSON on stdout). */
export interface ProbeSummary {
  /** Successful requests per backend name. */
  counts: Record<string, number>;
  /** Failed requests per error code. */
  errors: Record<string, number>;
  /** Distinct client addresses each backend reported, sorted. */
  clientsSeen: Record<string, string[]>;
  /** Every request's outcome, in order. */
  results: RequestResult[];
  /** When the first request was started, ms since the epoch (the machine's clock, shared by every namespace); 0 for no request. */
  firstSentMs: number;
  /** When the first request's connection was established (or, if it never was, the request ended), ms since the epoch; 0 for no request. Its SYN passed the kernel's hooks between {@link firstSentMs} and this. */
  firstConnectedMs: number;
  /** When the last request was started, ms since the epoch; 0 for no request. */
  lastSentMs: number;
  /**
   * The longest time from one request's start to the next one's connection
   * (or end), ms (0 for fewer than two): an upper bound on the time between
   * their SYNs in the kernel, even when the helper stalled between taking
   * the time and connecting.
   */
  longestGapMs: number;
}

/** Input of `probe-cli.mjs traffic` (JSON in its argument). */
export interface TrafficRequest {
  host: string;
  port: number;
  /** Connections opened first and kept open, each making one request per interval. */
  held: number;
  /** Pause between two rounds (one new connection, one request on each held one), ms. */
  intervalMs: number;
  /** Deadline of a new connection's request (connect + response), ms. */
  timeoutMs: number;
  /** Deadline of one reply on a held connection, ms; a held connection that misses it counts as lost. */
  heldTimeoutMs: number;
  /**
   * `udp`: each held "connection" is a UDP flow, one socket kept on its
   * source port (so one conntrack entry), and each new one a datagram from
   * a fresh port; a held flow answered by another backend than at first
   * counts as lost (EMOVED) [tcp].
   */
  protocol?: 'tcp' | 'udp';
}

/** Output of `probe-cli.mjs traffic` when its stdin closes. */
export interface TrafficSummary {
  /** New connections attempted, one request each. */
  attempted: number;
  /** Of them, those that got no echo reply. */
  failed: number;
  /** Failed new connections per error code. */
  errors: Record<string, number>;
  /** Successful new connections per backend name. */
  backends: Record<string, number>;
  /** Long-lived connections opened before the traffic started. */
  held: number;
  /** Long-lived connections per backend name (the one that answered each first request). */
  heldBackends: Record<string, number>;
  /** Requests made on the long-lived connections. */
  heldRequests: number;
  /** Long-lived connections that broke (a request failed or timed out); none is reopened. */
  lost: number;
  /** Broken long-lived connections per error code. */
  lostErrors: Record<string, number>;
  /** Broken long-lived connections per backend name (the one each was held to). */
  lostBackends: Record<string, number>;
}
