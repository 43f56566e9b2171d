/**
 * zod schemas for the Kubernetes objects drover reads, in the shape
 * `kubectl get svc,endpointslices,endpoints,nodes -A -o yaml` prints them:
 * `v1 Service`, `discovery.k8s.io/v1 EndpointSlice`, legacy `v1 Endpoints`,
 * `v1 Node` and `v1 Pod` (what the EndpointSlice controller reads of it).
 *
 * Only the fields drover uses are declared; every other field (managedFields,
 * ownerReferences, most of status, targetRef, fields of newer API
 * versions...) is stripped, never rejected. Declared fields are validated
 * strictly (validate.ts), except endpoint addresses, which parse.ts reads one
 * by one; API defaults are applied here, as the API server
 * would (pkg/apis/core/v1/defaults.go, pkg/apis/discovery/v1/defaults.go):
 * namespace "default", protocol TCP, port name "", Service type ClusterIP,
 * sessionAffinity None, traffic policies Cluster, LoadBalancer ipMode VIP.
 *
 * Schemas are applied after dispatch on apiVersion/kind (parse.ts), so
 * `apiVersion`/`kind` are not re-checked here.
 */
import { z } from 'zod';
import { labelMapSchema, optional, portSchema, protocolSchema, refineServicePorts, validated, withDefault } from './schema.ts';
import type { Check } from './validate.ts';
import {
  checkDNSLabel,
  checkDNSSubdomain,
  checkIntRange,
  checkNodeName,
  checkPortName,
  checkServiceIP,
  checkUnicastIPv4,
  checkZone,
  ipFamilyOf,
} from './validate.ts';
import { isCanonicalIPv4, isIPv6, parseCIDR as parseAnyCIDR } from './addr.ts';

/** `metadata.namespace`: a DNS-1123 label, "default" when absent or "" (kubectl's behaviour for namespaced objects). */
export const namespaceSchema = withDefault(validated((s) => (s === '' ? undefined : checkDNSLabel(s))), '').transform((s) =>
  s === '' ? 'default' : s,
);

/** A port name in a Service or an endpoint port: a DNS-1123 label, or "" (absent) for an unnamed port. */
const portNameSchema = withDefault(validated((s) => (s === '' ? undefined : checkDNSLabel(s))), '');

/** The protocol as Kubernetes spells it: exactly TCP, UDP or SCTP; TCP when absent. */
const k8sProtocol = protocolSchema({ ignoreCase: false });

// ---------------------------------------------------------------- Service

/**
 * `spec.targetPort`: a port number or a named container port (IntOrString).
 * Used only to derive endpoints from Pods (pods.ts); absent means `port`.
 */
const targetPortSchema = optional(z.union([portSchema, validated(checkPortName)]));

/**
 * Check `spec.clusterIP`: "" (none assigned), "None" (headless), a unicast
 * IPv4 address, or an IPv6 address (parse.ts ignores such services).
 */
export const checkClusterIP: Check<string> = (s) => {
  if (s === '' || s === 'None') return undefined;
  // An IPv4 address (by far the common case) is never IPv6 text, and is the cheaper to recognise.
  if (isCanonicalIPv4(s)) return checkUnicastIPv4(s);
  return isIPv6(s) ? undefined : checkUnicastIPv4(s);
};

/** `spec.clusterIP`: see {@link checkClusterIP}; "" when absent. */
const clusterIPSchema = withDefault(validated(checkClusterIP), '');

/** The values of `spec.type`. */
export const SERVICE_TYPES = ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'] as const;
/** The values of `spec.internalTrafficPolicy` and `spec.externalTrafficPolicy`. */
export const TRAFFIC_POLICIES = ['Cluster', 'Local'] as const;
/** The values of `spec.sessionAffinity`. */
export const SESSION_AFFINITIES = ['None', 'ClientIP'] as const;
/** The values of `status.loadBalancer.ingress[].ipMode`. */
export const IP_MODES = ['VIP', 'Proxy'] as const;
/** The values of `spec.ipFamilies[]`. */
export const IP_FAMILIES = ['IPv4', 'IPv6'] as const;

const trafficPolicy = withDefault(z.enum(TRAFFIC_POLICIES), 'Cluster');

/** Check a `spec.clusterIPs[]` entry: "None" (headless) or a ClusterIP of either family (validate.ts `checkServiceIP`). */
export const checkClusterIPsEntry: Check<string> = (s) => (s === 'None' ? undefined : checkServiceIP(s));

const clusterIPsEntrySchema = validated(checkClusterIPsEntry);

/**
 * One `status.loadBalancer.ingress[]` entry: an IP (either family) and/or
 * a hostname, and `ipMode` (VIP when absent, the API default since
 * Kubernetes 1.30).
 */
const loadBalancerIngressSchema = z.object({
  ip: optional(validated(checkServiceIP)),
  hostname: optional(z.string()),
  ipMode: withDefault(z.enum(IP_MODES), 'VIP'),
});

/**
 * The cross-field rules of a Service's ClusterIPs, as the API server
 * enforces them (pkg/apis/core/validation ValidateService): `clusterIPs[0]`
 * equals `clusterIP` when both are set; at most one ClusterIP per family;
 * `ipFamilies[i]` is the family of `clusterIPs[i]`. For use in
 * `.superRefine` on the spec; issues are reported at the offending entry.
 */
export function refineClusterIPs(
  spec: { clusterIP: string; clusterIPs: readonly string[]; ipFamilies: readonly string[] },
  ctx: z.RefinementCtx,
): void {
  if (spec.clusterIPs.length === 0 && spec.ipFamilies.length === 0) return; // nothing to compare
  const issue = (path: Array<string | number>, message: string) => ctx.addIssue({ code: 'custom', path, message });
  const [first] = spec.clusterIPs;
  if (first !== undefined && spec.clusterIP !== '' && first !== spec.clusterIP) {
    issue(['clusterIPs', 0], `"${first}" must equal spec.clusterIP "${spec.clusterIP}"`);
  }
  const ips = spec.clusterIPs.filter((ip) => ip !== 'None');
  if (ips.length === 2 && ipFamilyOf(ips[0]!) === ipFamilyOf(ips[1]!)) {
    issue(['clusterIPs', 1], `"${ips[1]}" is a second ${ipFamilyOf(ips[1]!)} ClusterIP (at most one per family)`);
  }
  spec.ipFamilies.forEach((family, i) => {
    const ip = ips[i];
    if (ip !== undefined && ipFamilyOf(ip) !== family) issue(['ipFamilies', i], `${family} does not match ClusterIP "${ip}"`);
  });
  if (spec.ipFamilies.length === 2 && spec.ipFamilies[0] === spec.ipFamilies[1]) issue(['ipFamilies', 1], `${spec.ipFamilies[1]} is listed twice`);
}

/** One entry of `spec.ports` (core/v1 ServicePort). */
export const k8sServicePortSchema = z.object({
  name: portNameSchema,
  protocol: k8sProtocol,
  port: portSchema,
  targetPort: targetPortSchema,
  nodePort: optional(portSchema),
});

/** Services with this label belong to another service proxy (kube-proxy's apis.LabelServiceProxyName). */
export const SERVICE_PROXY_NAME_LABEL = 'service.kubernetes.io/service-proxy-name';
/** The endpoints controller puts this label on the EndpointSlices of headless Services (core/v1 IsHeadlessService). */
export const HEADLESS_LABEL = 'service.kubernetes.io/headless';

/**
 * Why an object with these labels is not drover's to proxy, or undefined
 * when it is: kube-proxy's informers select
 * `!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name`
 * (cmd/kube-proxy/app/server.go). drover applies it to Services in every
 * source (a labelled Service gets no ports, so its EndpointSlices serve
 * nothing). Only the presence of a label counts, whatever its value.
 */
export function notOursReason(labels: Readonly<Record<string, unknown>> | null | undefined): string | undefined {
  if (labels?.[SERVICE_PROXY_NAME_LABEL] !== undefined) return `labelled ${SERVICE_PROXY_NAME_LABEL} (another service proxy serves it)`;
  if (labels?.[HEADLESS_LABEL] !== undefined) return `labelled ${HEADLESS_LABEL} (not proxied)`;
  return undefined;
}

/**
 * v1 Service, after dispatch. `spec.ports` obeys the port-set rules of
 * schema.ts `refineServicePorts`, the ClusterIPs those of
 * {@link refineClusterIPs}. Also read: `spec.clusterIPs`/`ipFamilies` (at
 * most 2 each), `spec.externalIPs`, `spec.loadBalancerSourceRanges`,
 * `spec.healthCheckNodePort`, `status.loadBalancer.ingress`, and for
 * deriving endpoints from Pods `spec.selector` (a map of label keys to
 * values) and `spec.publishNotReadyAddresses` (default false); of the
 * labels, only the two of {@link notOursReason}. fast-service.ts reads the
 * common shape of a Service without it and must give what it gives: a
 * change here is a change there too (model-fast-service.test.ts compares
 * them).
 */
export const k8sServiceSchema = z.object({
  metadata: z.object({
    name: validated(checkDNSLabel),
    namespace: namespaceSchema,
    // Only the two labels of notOursReason are read; the others are never kept.
    labels: z
      .object({ [SERVICE_PROXY_NAME_LABEL]: z.unknown().optional(), [HEADLESS_LABEL]: z.unknown().optional() })
      .nullish()
      .catch(undefined),
  }),
  spec: z.object({
    type: withDefault(z.enum(SERVICE_TYPES), 'ClusterIP'),
    clusterIP: clusterIPSchema,
    clusterIPs: withDefault(z.array(clusterIPsEntrySchema).max(2), []),
    ipFamilies: withDefault(z.array(z.enum(IP_FAMILIES)).max(2), []),
    externalIPs: withDefault(z.array(validated(checkServiceIP)), []),
    loadBalancerSourceRanges: withDefault(z.array(z.string()), []),
    healthCheckNodePort: optional(portSchema),
    ports: withDefault(z.array(k8sServicePortSchema), []).superRefine(refineServicePorts),
    sessionAffinity: withDefault(z.enum(SESSION_AFFINITIES), 'None'),
    sessionAffinityConfig: optional(
      z.object({
        clientIP: optional(
          z.object({
            /** Seconds, 1-86400, default 10800 (core/v1 DefaultClientIPServiceAffinitySeconds). */
            timeoutSeconds: withDefault(
              z.number().superRefine((v, ctx) => {
                const problem = checkIntRange(v, 1, 86400);
                if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
              }),
              10800,
            ),
          }),
        ),
      }),
    ),
    internalTrafficPolicy: trafficPolicy,
    externalTrafficPolicy: trafficPolicy,
    selector: labelMapSchema,
    publishNotReadyAddresses: withDefault(z.boolean(), false),
  }).superRefine(refineClusterIPs),
  status: optional(
    z.object({
      loadBalancer: optional(z.object({ ingress: withDefault(z.array(loadBalancerIngressSchema), []) })),
    }),
  ),
});

/** Output type of {@link k8sServiceSchema}. */
export type K8sService = z.output<typeof k8sServiceSchema>;

// ---------------------------------------------------------------- EndpointSlice

/** The label that ties an EndpointSlice to its Service (discovery.k8s.io/v1 LabelServiceName). */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/**
 * EndpointConditions with the API's nil semantics: ready nil → true;
 * serving nil → same as ready ("If nil, consumers should defer to the ready
 * condition"); terminating nil → false.
 */
const conditionsSchema = optional(
  z.object({
    ready: optional(z.boolean()),
    serving: optional(z.boolean()),
    terminating: optional(z.boolean()),
  }),
).transform((c) => {
  const ready = c?.ready ?? true;
  return { ready, serving: c?.serving ?? ready, terminating: c?.terminating ?? false };
});

/**
 * EndpointHints (discovery.k8s.io/v1): `forZones[].name` are zones
 * (label values), `forNodes[].name` node names; each list at most 8 long,
 * as the API allows.
 */
const endpointHintsSchema = z.object({
  forZones: withDefault(z.array(z.object({ name: validated(checkZone) })).max(8), []),
  forNodes: withDefault(z.array(z.object({ name: validated(checkNodeName) })).max(8), []),
});

/**
 * One endpoint (discovery.k8s.io/v1 Endpoint): 1-100 addresses (kube-proxy
 * uses the first), conditions, optional nodeName, zone and hints. The addresses
 * are only required to be strings here: parse.ts reads each one
 * (validate.ts `parseEndpointIPv4`), so that a bad address skips its
 * endpoint with a warning instead of the whole slice.
 */
const sliceEndpointSchema = z.object({
  addresses: z.array(z.string()).min(1).max(100),
  conditions: conditionsSchema,
  nodeName: optional(validated(checkNodeName)),
  zone: optional(validated(checkZone)),
  hints: optional(endpointHintsSchema),
});

/**
 * One EndpointPort. `port` may be absent in the API ("all ports"), which
 * kube-proxy ignores (pkg/proxy/endpointslicecache.go); parse.ts does the same.
 */
const slicePortSchema = z.object({
  name: portNameSchema,
  protocol: k8sProtocol,
  port: optional(portSchema),
});

/**
 * discovery.k8s.io/v1 EndpointSlice with addressType IPv4, after dispatch.
 * fast-slice.ts reads the common shape of a slice without it and must give
 * what it gives: a change here is a change there too
 * (model-fast-slice.test.ts compares them).
 */
export const k8sEndpointSliceSchema = z.object({
  metadata: z.object({
    name: validated(checkDNSSubdomain),
    namespace: namespaceSchema,
    labels: z.object({ [SERVICE_NAME_LABEL]: validated(checkDNSLabel) }),
  }),
  endpoints: withDefault(z.array(sliceEndpointSchema), []),
  ports: withDefault(z.array(slicePortSchema), []),
});

/** Output type of {@link k8sEndpointSliceSchema}. */
export type K8sEndpointSlice = z.output<typeof k8sEndpointSliceSchema>;

// ---------------------------------------------------------------- Endpoints (legacy)

/**
 * core/v1 EndpointAddress: an `ip` and an optional nodeName (hostname,
 * targetRef... stripped). Like a slice's addresses, `ip` is only required to
 * be a string here and is read by parse.ts, which skips a bad one alone.
 */
const endpointAddressSchema = z.object({
  ip: z.string(),
  nodeName: optional(validated(checkNodeName)),
});

/** core/v1 EndpointPort: port is required here, unlike in EndpointSlices. */
const endpointPortSchema = z.object({
  name: portNameSchema,
  protocol: k8sProtocol,
  port: portSchema,
});

/** v1 Endpoints (legacy), after dispatch: `subsets[].addresses` are ready, `notReadyAddresses` are not. */
export const k8sEndpointsSchema = z.object({
  metadata: z.object({
    name: validated(checkDNSLabel),
    namespace: namespaceSchema,
  }),
  subsets: withDefault(
    z.array(
      z.object({
        addresses: withDefault(z.array(endpointAddressSchema), []),
        notReadyAddresses: withDefault(z.array(endpointAddressSchema), []),
        ports: withDefault(z.array(endpointPortSchema), []),
      }),
    ),
    [],
  ),
});

/** Output type of {@link k8sEndpointsSchema}. */
export type K8sEndpoints = z.output<typeof k8sEndpointsSchema>;

// ---------------------------------------------------------------- Node

/** The well-known label that carries a node's zone (core/v1 LabelTopologyZone). */
export const TOPOLOGY_ZONE_LABEL = 'topology.kubernetes.io/zone';

/** core/v1 NodeAddress: `address` must be an IP (either family) for InternalIP and ExternalIP, a non-empty string otherwise. */
const nodeAddressSchema = z
  .object({
    type: z.enum(['InternalIP', 'ExternalIP', 'Hostname', 'InternalDNS', 'ExternalDNS']),
    address: z.string().min(1),
  })
  .superRefine((a, ctx) => {
    if (a.type !== 'InternalIP' && a.type !== 'ExternalIP') return;
    const problem = checkServiceIP(a.address);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', path: ['address'], message: problem });
  });

/**
 * A pod CIDR of a Node's `spec.podCIDRs`: a CIDR of either family in its
 * canonical form, without host bits (the API server's validation,
 * ValidateNodeSpecificAnnotations/validateNodeSpec: ParseCIDR and
 * canonical). Returns the problem, or undefined.
 */
export const checkPodCIDR: Check<string> = (value) => {
  const read = parseAnyCIDR(value);
  if (read === undefined) return `${JSON.stringify(value)} is not a CIDR (e.g. "10.244.1.0/24")`;
  if (read.prefix.text !== value) return `${JSON.stringify(value)} is not canonical or has host bits set; did you mean "${read.prefix.text}"?`;
  return undefined;
};

/**
 * v1 Node, after dispatch: its name (a DNS-1123 subdomain), the
 * `topology.kubernetes.io/zone` label ("" is read as absent),
 * `spec.podCIDRs` (at most one per family, as the API server allows) and
 * `status.addresses`. Every other label and field is stripped.
 */
export const k8sNodeSchema = z.object({
  metadata: z.object({
    name: validated(checkNodeName),
    labels: optional(z.object({ [TOPOLOGY_ZONE_LABEL]: optional(validated((s) => (s === '' ? undefined : checkZone(s)))) })),
    // Only whether it is set matters (the node is being deleted).
    deletionTimestamp: optional(z.string()),
  }),
  // Only the keys are read, and only compared with TO_BE_DELETED_TAINT.
  spec: optional(
    z.object({
      taints: withDefault(z.array(z.object({ key: z.string() })), []),
      podCIDRs: withDefault(z.array(validated(checkPodCIDR)), []).refine((cidrs) => new Set(cidrs.map((c) => c.includes(':'))).size === cidrs.length, {
        message: 'lists two CIDRs of one IP family (at most one per family)',
      }),
    }),
  ),
  status: optional(z.object({ addresses: withDefault(z.array(nodeAddressSchema), []) })),
});

/** The cluster autoscaler's taint on a node it is about to delete (kube-proxy's proxy_health.go ToBeDeletedTaint). */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

/** Output type of {@link k8sNodeSchema}. */
export type K8sNode = z.output<typeof k8sNodeSchema>;

// ---------------------------------------------------------------- Pod

/** A node name that may be "" or absent (not scheduled yet); "" is read as absent. */
export const optionalNodeName = optional(validated((s) => (s === '' ? undefined : checkNodeName(s)))).transform((s) => (s === '' ? undefined : s));

/** core/v1 ContainerPort: `containerPort`, and the optional `name` a Service's named targetPort looks for. */
const containerPortSchema = z.object({
  name: optional(validated(checkPortName)),
  containerPort: portSchema,
  protocol: k8sProtocol,
});

/** A container: only its ports are read (an init container also its `restartPolicy`, "Always" for a sidecar). */
const containerSchema = z.object({
  ports: withDefault(z.array(containerPortSchema), []),
  restartPolicy: optional(z.string()),
});

/**
 * v1 Pod, after dispatch: what the EndpointSlice controller reads of it
 * (staging/src/k8s.io/endpointslice/utils.go podToEndpoint, FindPort;
 * util/controller_utils.go ShouldPodBeInEndpoints): name, namespace,
 * labels, `deletionTimestamp`, `spec.nodeName`, the container ports (and
 * those of sidecar init containers), `status.phase`, `status.podIP`,
 * `status.podIPs` and `status.conditions`. The pod IPs are only required
 * to be strings here; parse.ts reads them.
 */
export const k8sPodSchema = z.object({
  metadata: z.object({
    name: validated(checkDNSSubdomain),
    namespace: namespaceSchema,
    labels: labelMapSchema,
    deletionTimestamp: optional(z.string()),
  }),
  spec: optional(
    z.object({
      nodeName: optionalNodeName,
      containers: withDefault(z.array(containerSchema), []),
      initContainers: withDefault(z.array(containerSchema), []),
    }),
  ),
  status: optional(
    z.object({
      phase: optional(z.string()),
      podIP: optional(z.string()),
      podIPs: withDefault(z.array(z.object({ ip: z.string() })), []),
      conditions: withDefault(z.array(z.object({ type: z.string(), status: z.string() })), []),
    }),
  ),
});

/** Output type of {@link k8sPodSchema}. */
export type K8sPod = z.output<typeof k8sPodSchema>;
