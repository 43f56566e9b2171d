/**
 * Endpoints from Pods: what Kubernetes' EndpointSlice controller writes for
 * a Service with a selector, computed in place (pkg/controller/endpointslice,
 * staging/src/k8s.io/endpointslice: reconciler.go, utils.go podToEndpoint,
 * getEndpointPorts, FindPort; util/controller_utils.go
 * ShouldPodBeInEndpoints), reduced to a pure function of the parsed objects:
 *
 *   - a Pod is selected when it is in the Service's namespace and has every
 *     label of the selector with the same value (labels.Set(selector)
 *     .AsSelectorPreValidated()); an empty selector selects nothing (a
 *     Service without a selector gets no endpoints from the controller);
 *   - a selected Pod gives an endpoint unless its phase is Succeeded or
 *     Failed, or it has no IPv4 address;
 *   - conditions: serving = the Pod is ready; terminating = it has a
 *     deletionTimestamp; ready = publishNotReadyAddresses, or serving and
 *     not terminating;
 *   - the endpoint's port for each service port is the `targetPort` when it
 *     is a number, or the Pod's container port of that name and the service
 *     port's protocol (per Pod, so Pods may differ); a Pod without it gives
 *     no endpoint for that service port;
 *   - nodeName is the Pod's, the zone the `topology.kubernetes.io/zone`
 *     label of the Node of that name, when the source holds that Node.
 *
 * One difference: the controller leaves out a Pod whose Node it cannot find
 * (and retries); drover keeps it, without a zone, because a manifest folder
 * rarely holds Node objects.
 *
 * Each endpoint names its Pod ("namespace/name", types.ts Endpoint.pod).
 */
import { compareStrings } from './order.ts';
import type { EndpointGroup, EndpointGroupPort, ParsedNode, ParsedPod, ParsedService, ParsedServicePort } from './parsed.ts';
import type { Snapshot } from './types.ts';

/** Pods by namespace, each list sorted by name, for {@link selectedPods}. */
export type PodIndex = ReadonlyMap<string, readonly ParsedPod[]>;

/** Index `pods` by namespace. Linear in the number of Pods (plus the sort). */
export function indexPods(pods: readonly ParsedPod[]): PodIndex {
  const out = new Map<string, ParsedPod[]>();
  for (const p of [...pods].sort((a, b) => compareStrings(a.name, b.name))) {
    const list = out.get(p.namespace);
    if (list) list.push(p);
    else out.set(p.namespace, [p]);
  }
  return out;
}

/** True when `selector` is not empty and `labels` has each of its keys with the same value. */
export function selects(selector: ReadonlyMap<string, string>, labels: ReadonlyMap<string, string>): boolean {
  if (selector.size === 0) return false;
  for (const [key, value] of selector) if (labels.get(key) !== value) return false;
  return true;
}

/** The Pods of `svc`'s namespace that its selector selects (in name order). */
export function selectedPods(svc: Pick<ParsedService, 'namespace' | 'selector'>, pods: PodIndex): ParsedPod[] {
  if (svc.selector.size === 0) return [];
  return (pods.get(svc.namespace) ?? []).filter((p) => selects(svc.selector, p.labels));
}

/** Node name → its zone label, for the Nodes that have one. */
export function nodeZones(nodes: readonly ParsedNode[]): ReadonlyMap<string, string> {
  return new Map(nodes.flatMap((n) => (n.zone !== undefined ? [[n.name, n.zone] as const] : [])));
}

/** The port `pod` serves service port `p` on (FindPort), or undefined when a named targetPort has no container port of that name and protocol. */
function findPort(pod: ParsedPod, p: ParsedServicePort): number | undefined {
  if (typeof p.targetPort === 'number') return p.targetPort;
  return pod.ports.find((c) => c.name === p.targetPort && c.protocol === p.protocol)?.port;
}

/**
 * The endpoint groups the EndpointSlice controller would write for `svc`
 * from `pods` (already selected, see {@link selectedPods}): one group per
 * Pod that gives an endpoint, with the ports it serves (named after the
 * service ports) and its address of each family (its IPv4 and IPv6 Pod
 * IPs, as the controller writes one slice per family), and its hostname
 * when it has `spec.hostname` and its `spec.subdomain` is the Service's
 * name (for DNS, EndpointGroup.hostnames). `zones` are the Node zones
 * ({@link nodeZones}). Linear in Pods × service ports.
 */
export function podEndpointGroups(svc: ParsedService, pods: readonly ParsedPod[], zones: ReadonlyMap<string, string>): EndpointGroup[] {
  const groups: EndpointGroup[] = [];
  for (const pod of pods) {
    if (pod.terminal || (pod.ip === undefined && pod.ipv6 === undefined)) continue;
    const ports: EndpointGroupPort[] = [];
    for (const p of svc.ports) {
      const port = findPort(pod, p);
      if (port !== undefined) ports.push({ name: p.name, port, protocol: p.protocol });
    }
    if (ports.length === 0) continue;
    const serving = pod.ready;
    const zone = pod.nodeName !== undefined ? zones.get(pod.nodeName) : undefined;
    // One address per family the Pod has: each family's view takes its own (family.ts).
    const addresses = [pod.ip, pod.ipv6].flatMap((ip) =>
      ip === undefined
        ? []
        : [
            {
              ip,
              ready: svc.publishNotReadyAddresses || (serving && !pod.terminating),
              serving,
              terminating: pod.terminating,
              ...(pod.nodeName !== undefined ? { nodeName: pod.nodeName } : {}),
              ...(zone !== undefined ? { zone } : {}),
              pod: `${pod.namespace}/${pod.name}`,
            },
          ],
    );
    // The controller's endpoint hostname: the Pod's spec.hostname when its spec.subdomain is the Service's name (endpointslice utils podToEndpoint).
    if (pod.hostname !== undefined && pod.subdomain === svc.name) groups.push({ ports, addresses, hostnames: new Map(addresses.map((a) => [a.ip, pod.hostname!])) });
    else groups.push({ ports, addresses });
  }
  return groups;
}

/** The key of {@link endpointPods}: "servicePort ip:port", e.g. "default/web:http 10.244.1.5:8080". */
export function endpointPodKey(servicePort: string, endpoint: string): string {
  return `${servicePort} ${endpoint}`;
}

/**
 * The Pod ("namespace/name") of every endpoint of `snapshot` derived from
 * one, of both families, by {@link endpointPodKey}: what `drover chains` adds to the kernel's
 * view, which carries no Pod names. Linear in the endpoints.
 */
export function endpointPods(snapshot: Snapshot): ReadonlyMap<string, string> {
  const out = new Map<string, string>();
  for (const services of [snapshot.services, snapshot.ipv6Services ?? []]) {
    for (const sp of services.values()) {
      for (const e of sp.endpoints) if (e.pod !== undefined) out.set(endpointPodKey(sp.key, `${e.ip}:${e.port}`), e.pod);
    }
  }
  return out;
}
