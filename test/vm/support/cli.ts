/**
 * Running drover's command line inside a network namespace of the guest
 * (`ip netns exec NS node bin/drover.js ...`: netlink sockets act in the
 * namespace of their process), and the Kubernetes manifests the VM tests
 * feed it.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run, type RunResult } from '../../../src/testbed/exec.ts';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
/** bin/drover.js of this checkout. */
export const DROVER = join(ROOT, 'bin/drover.js');
/** Bound on one drover command: in the emulated guest a start alone takes seconds to tens of seconds, a sync most of a minute. */
export const START_MS = 300_000;

/** Run `drover ARGS` inside `netns`; never throws on a non-zero exit code. */
export function drover(netns: string, args: readonly string[]): Promise<RunResult> {
  return run(process.execPath, [DROVER, ...args], { netns, allowFail: true, timeoutMs: START_MS });
}

/** A ClusterIP Service "default/NAME" with one port named "p" (targetPort = port unless given). */
export function service(name: string, clusterIP: string, port: number, protocol: string, extra: Record<string, unknown> = {}, targetPort = port): object {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default' },
    spec: { clusterIP, ports: [{ name: 'p', port, protocol, targetPort }], type: 'ClusterIP', ...extra },
  };
}

/** The EndpointSlice of Service "default/NAME": ready endpoints `ips` on port "p". */
export function slice(name: string, ips: readonly string[], port: number, protocol: string): object {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${name}-abc`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
    ports: [{ name: 'p', port, protocol }],
  };
}

/** A `kind: List` manifest of `items`, as JSON. */
export function list(items: readonly object[]): string {
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}
