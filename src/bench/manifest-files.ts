/**
 * The benchmark's desired state as the manifest files a real `drover run`
 * reads (the end-to-end clock, end-to-end.ts). Pure: the same service ports
 * give the same bytes.
 *
 * Layout of the source folder:
 * - `services.json`: every synthetic service port in one `v1 List` (as
 *   `kubectl get -o json` prints one), Services and EndpointSlices;
 * - `<name>.json`: each clock service and each added service in its own
 *   file, so that one change rewrites (or removes) one small file.
 */
import type { ServicePort } from '../model/types.ts';

/** The file of the synthetic service ports. */
export const BULK_FILE = 'services.json';

/** The file that holds service port `port` on its own: `<Service name>.json`. */
export function ownFileName(port: Pick<ServicePort, 'name'>): string {
  return `${port.name}.json`;
}

/**
 * A Kubernetes `v1 Service` and `discovery.k8s.io/v1 EndpointSlice` for one
 * bench service port (synth.ts): a ClusterIP Service with one port, and one
 * IPv4 slice named `<name>-1` with one ready endpoint per address.
 * @throws Error when the endpoints do not share one port (one slice port
 *   cannot say otherwise), or the port has none.
 */
export function serviceObjects(port: ServicePort): [Record<string, unknown>, Record<string, unknown>] {
  const targets = [...new Set(port.endpoints.map((e) => e.port))];
  if (targets.length !== 1) throw new Error(`${port.key}: a bench manifest needs endpoints on exactly one port, got ${targets.length}`);
  const metadata = { name: port.name, namespace: port.namespace };
  const protocol = port.protocol;
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata,
      spec: {
        type: 'ClusterIP',
        clusterIP: port.clusterIP,
        clusterIPs: [port.clusterIP],
        ports: [{ name: port.portName, port: port.port, protocol, targetPort: targets[0] }],
      },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${port.name}-1`, namespace: port.namespace, labels: { 'kubernetes.io/service-name': port.name } },
      addressType: 'IPv4',
      ports: [{ name: port.portName, port: targets[0], protocol }],
      endpoints: port.endpoints.map((e) => ({ addresses: [e.ip], conditions: { ready: e.ready, serving: e.serving, terminating: e.terminating } })),
    },
  ];
}

/** One manifest file holding `ports` (their Services and EndpointSlices) as a `v1 List`, one object per line. */
export function manifestText(ports: readonly ServicePort[]): string {
  const items = ports.flatMap((p) => serviceObjects(p)).map((o) => `    ${JSON.stringify(o)}`);
  return `{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [\n${items.join(',\n')}${items.length > 0 ? '\n' : ''}  ]\n}\n`;
}

/**
 * The files of the source folder for the starting state: `services.json`
 * with every port not in `own`, and one `<name>.json` per port of `own`.
 * @returns file name → text, `services.json` first, then `own` in its order.
 */
export function sourceFiles(ports: Iterable<ServicePort>, own: readonly ServicePort[]): Map<string, string> {
  const ownKeys = new Set(own.map((p) => p.key));
  const files = new Map<string, string>([[BULK_FILE, manifestText([...ports].filter((p) => !ownKeys.has(p.key)))]]);
  for (const p of own) files.set(ownFileName(p), manifestText([p]));
  return files;
}
