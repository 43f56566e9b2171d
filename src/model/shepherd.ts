/**
 * zod schema for a Shepherd Service. Shepherd is a small teaching
 * orchestrator whose Service looks like Kubernetes' but is snake_case,
 * carries no apiVersion, spells protocols in lower case (optional, default
 * tcp), has an optional `target_port` (default: `port`; Shepherd's API
 * server sends 0 for one not given, which is an error: Shepherd's own
 * endpoints then say ":0"), an optional `type` (default ClusterIP; "", what
 * the API server sends for one not given, counts as not given), assigns no
 * ClusterIP (`status.cluster_ip` is "" or absent) and lists its endpoints
 * inline as "ip:port" strings, one per pod per port:
 *
 *     {"kind":"Service","metadata":{"name":"web-service","namespace":"default"},
 *      "spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80,"target_port":8080,"protocol":"tcp"}],
 *              "type":"ClusterIP"},
 *      "status":{"cluster_ip":"","endpoints":["10.20.0.2:8080","10.20.0.3:8080"]}}
 *
 * `spec.selector` picks the Pods whose endpoints drover derives when
 * `status.endpoints` is empty (pods.ts). A Shepherd Pod is snake_case too
 * (`status.phase`, `status.pod_ip`, `spec.node_name`,
 * `spec.containers[].ports[].container_port`, `name`, `protocol`):
 *
 *     {"kind":"Pod","metadata":{"name":"web-1","namespace":"default","labels":{"app":"web"}},
 *      "spec":{"node_name":"node-1","containers":[{"name":"web","ports":[{"name":"http","container_port":8080}]}]},
 *      "status":{"phase":"Running","pod_ip":"10.244.1.5"}}
 *
 * Unknown fields are stripped. Every declared field is
 * validated as strictly as its Kubernetes counterpart, except the
 * `status.endpoints` strings: parse.ts reads each one (validate.ts
 * `parseIPv4HostPort`), so that a bad entry is skipped alone with a warning.
 */
import { z } from 'zod';
import { namespaceSchema, optionalNodeName } from './kubernetes.ts';
import { labelMapSchema, optional, portSchema, protocolSchema, refineServicePorts, validated, withDefault } from './schema.ts';
import { checkDNSLabel, checkDNSSubdomain, checkPortName, checkUnicastIPv4 } from './validate.ts';

/** One entry of `spec.ports`; `target_port` defaults to `port` in parse.ts. */
const shepherdPortSchema = z.object({
  name: withDefault(validated((s) => (s === '' ? undefined : checkDNSLabel(s))), ''),
  port: portSchema,
  target_port: portSchema.nullish(),
  protocol: protocolSchema({ ignoreCase: true }),
  node_port: portSchema.nullish(),
});

/** A Shepherd Service, after dispatch (kind Service, no apiVersion). */
export const shepherdServiceSchema = z.object({
  metadata: z.object({
    name: validated(checkDNSLabel),
    namespace: namespaceSchema,
  }),
  spec: z.object({
    /** Shepherd's API server encodes a type not given as "". */
    type: z.preprocess((v) => (v === '' ? undefined : v), withDefault(z.enum(['ClusterIP', 'NodePort', 'LoadBalancer']), 'ClusterIP')),
    ports: withDefault(z.array(shepherdPortSchema), []).superRefine(refineServicePorts),
    selector: labelMapSchema,
  }),
  status: withDefault(
    z.object({
      /** "" or absent: drover allocates one (allocate.ts). */
      cluster_ip: withDefault(validated((s) => (s === '' ? undefined : checkUnicastIPv4(s))), ''),
      /** "ip:port" strings, read by parse.ts. */
      endpoints: withDefault(z.array(z.string()), []),
    }),
    { cluster_ip: '', endpoints: [] },
  ),
});

/** Output type of {@link shepherdServiceSchema}. */
export type ShepherdService = z.output<typeof shepherdServiceSchema>;

/** One entry of a Shepherd container's `ports` (PortSpec): `name` may be "" or absent. */
const shepherdContainerPortSchema = z.object({
  name: optional(validated((s) => (s === '' ? undefined : checkPortName(s)))).transform((s) => (s === '' ? undefined : s)),
  container_port: portSchema,
  protocol: protocolSchema({ ignoreCase: true }),
});

/**
 * A Shepherd Pod, after dispatch (kind Pod, no apiVersion): name,
 * namespace, labels, `spec.node_name`, the container ports, `status.phase`
 * and `status.pod_ip` (only required to be a string here; parse.ts reads it).
 */
export const shepherdPodSchema = z.object({
  metadata: z.object({
    name: validated(checkDNSSubdomain),
    namespace: namespaceSchema,
    labels: labelMapSchema,
  }),
  spec: optional(
    z.object({
      node_name: optionalNodeName,
      containers: withDefault(z.array(z.object({ ports: withDefault(z.array(shepherdContainerPortSchema), []) })), []),
    }),
  ),
  status: optional(
    z.object({
      phase: optional(z.string()),
      pod_ip: optional(z.string()),
    }),
  ),
});

/** Output type of {@link shepherdPodSchema}. */
export type ShepherdPod = z.output<typeof shepherdPodSchema>;
