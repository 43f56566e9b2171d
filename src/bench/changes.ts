/**
 * The single changes a benchmark iteration makes, and what the data path
 * must show after each. Pure.
 *
 * Iteration i uses clock service c = i mod (number of clock services), whose
 * two real endpoints are `keep` and `toggle`, and one new service port
 * `added-i` with real endpoints:
 *
 * 1. endpoint removed: clock-c loses `toggle` (2 → 1 endpoints);
 * 2. endpoint added: clock-c gets `toggle` back (1 → 2);
 * 3. service added: `added-i` appears;
 * 4. service removed: `added-i` goes.
 *
 * Each pair puts the state back, so every change starts from the same table.
 */
import type { ServicePort, Snapshot } from '../model/types.ts';
import { addedServicePort, endpointId, withServicePort, type RealEndpoint } from './synth.ts';
import type { SingleChange } from './types.ts';

/**
 * What a new connection from the client must show for a change to count as
 * reached the data path (see prober.mjs):
 * - `lands`: answered by `endpoint`;
 * - `avoids`: `consecutive` connections in a row answered, none by `endpoint`;
 * - `answers`: answered at all;
 * - `fails`: `consecutive` connections in a row not answered (refused,
 *   unreachable or timed out).
 */
export type DataPathCheck =
  | { readonly until: 'lands'; readonly host: string; readonly port: number; readonly endpoint: string }
  | { readonly until: 'avoids'; readonly host: string; readonly port: number; readonly endpoint: string; readonly consecutive: number }
  | { readonly until: 'answers'; readonly host: string; readonly port: number }
  | { readonly until: 'fails'; readonly host: string; readonly port: number; readonly consecutive: number };

/** One service port going from `before` to `after` (undefined: absent). */
export interface ServiceChange {
  /** ServicePortName. */
  readonly key: string;
  readonly before: ServicePort | undefined;
  readonly after: ServicePort | undefined;
}

/** One single change of the benchmark. */
export interface BenchChange extends ServiceChange {
  readonly kind: SingleChange;
  /** Desired state before the change. */
  readonly from: Snapshot;
  /** Desired state after the change. */
  readonly to: Snapshot;
  /** What the client's connections must show. */
  readonly check: DataPathCheck;
}

/** A clock service port with its two real endpoints. */
export interface ClockService {
  readonly port: ServicePort;
  /** The endpoint that always stays. */
  readonly keep: RealEndpoint;
  /** The endpoint that is removed and added back. */
  readonly toggle: RealEndpoint;
}

/** Confirmation counts of the data-path checks. */
export interface CheckCounts {
  /** `avoids`: connections in a row on the survivor. */
  readonly removalConfirm: number;
  /** `fails`: failed connections in a row. */
  readonly failConfirm: number;
}

/**
 * The four changes of iteration `i`, starting from `base`, which must hold
 * every clock service port as given.
 * @param i 0-based iteration; also names the added service port.
 * @param addedEndpoints the real endpoints of the added service port.
 * @throws Error when the clock service does not hold its toggled endpoint.
 */
export function iterationChanges(
  base: Snapshot,
  clock: readonly ClockService[],
  i: number,
  addedEndpoints: readonly RealEndpoint[],
  counts: CheckCounts,
): BenchChange[] {
  const { port: svc, toggle: b } = clock[i % clock.length]!;
  const fewer: ServicePort = { ...svc, endpoints: svc.endpoints.filter((e) => !(e.ip === b.ip && e.port === b.port)) };
  if (fewer.endpoints.length !== svc.endpoints.length - 1) throw new Error(`${svc.key} has no endpoint ${b.ip}:${b.port}`);
  const reduced = withServicePort(base, svc.key, fewer);
  const added = addedServicePort(i, addedEndpoints);
  const grown = withServicePort(base, added.key, added);
  const at = { host: svc.clusterIP, port: svc.port };
  const addedAt = { host: added.clusterIP, port: added.port };
  return [
    {
      kind: 'endpoint-removed',
      key: svc.key,
      before: svc,
      after: fewer,
      from: base,
      to: reduced,
      check: { until: 'avoids', ...at, endpoint: endpointId(b), consecutive: counts.removalConfirm },
    },
    { kind: 'endpoint-added', key: svc.key, before: fewer, after: svc, from: reduced, to: base, check: { until: 'lands', ...at, endpoint: endpointId(b) } },
    { kind: 'service-added', key: added.key, before: undefined, after: added, from: base, to: grown, check: { until: 'answers', ...addedAt } },
    {
      kind: 'service-removed',
      key: added.key,
      before: added,
      after: undefined,
      from: grown,
      to: base,
      check: { until: 'fails', ...addedAt, consecutive: counts.failConfirm },
    },
  ];
}
