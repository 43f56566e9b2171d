/**
 * Raw objects the decoder property tests mix in rarely, each a case the
 * Decoder's patch paths hand to the whole build while it is held: a ready
 * Pod in default (endpoints derived from Pods), and a Shepherd Service
 * without an address (it is allocated one).
 */
export const RARE_OBJECTS: readonly object[] = [
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', namespace: 'default', labels: { app: 'a' } },
    spec: { nodeName: 'n1', containers: [{ ports: [{ name: 'http', containerPort: 8080 }] }] },
    status: { phase: 'Running', podIP: '10.244.0.9', conditions: [{ type: 'Ready', status: 'True' }] },
  },
  { kind: 'Service', metadata: { name: 'sh', namespace: 'shepherd' }, spec: { ports: [{ name: 'http', port: 80, target_port: 8080 }] }, status: { cluster_ip: '', endpoints: ['10.244.0.1:8080'] } },
];
