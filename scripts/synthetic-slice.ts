/**
 * The EndpointSlice of the scale scripts' synthetic Service `i` (source-scale.ts,
 * decoder-cost.ts): `endpoints` ready endpoints on node-a, each address unique
 * across Services (10.128.0.0 upwards); `edit` (if not 0) gives the first
 * endpoint another address (10.250.x.y), so that a change can be made.
 */
export function syntheticSlice(namespace: string, name: string, i: number, endpoints: number, edit = 0): object {
  const eps = [];
  for (let e = 0; e < endpoints; e++) {
    const k = i * endpoints + e;
    const ip = e === 0 && edit > 0 ? `10.250.${(edit >> 8) & 255}.${edit & 255}` : `10.${128 + (k >> 16)}.${(k >> 8) & 255}.${k & 255}`;
    eps.push({ addresses: [ip], conditions: { ready: true }, nodeName: 'node-a' });
  }
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${name}-abc`, namespace, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: eps,
  };
}
