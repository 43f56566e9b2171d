/**
 * The Corefile CoreDNS runs with in the DNS bench (scripts/dns-bench.ts
 * --peers): kubeadm's own (the `coredns` ConfigMap of Kubernetes v1.37,
 * cmd/kubeadm/app/phases/addons/dns/manifests.go), with these changes, each
 * for the bench:
 *
 * - `bind ADDRESS`: it listens on the bench's node DNS address only, where
 *   drover listens;
 * - `kubeconfig`: the kubernetes plugin reads the test API server with its
 *   admin kubeconfig (in a Pod it would use its ServiceAccount);
 * - `ttl 5` instead of kubeadm's 30: drover's TTL, and the plugin's default
 *   (dnsperf keeps no cache, so the TTL changes no measured figure);
 * - `forward . UPSTREAM` instead of `/etc/resolv.conf`: the same dead
 *   upstream drover gets; the bench asks for cluster names only;
 * - without `loop` and `reload`, which only act at the start and every 30 s
 *   on the Corefile, not on a query.
 *
 * kubeadm's `cache 30` caches names outside the cluster domain only
 * (`disable success` and `disable denial` for it), so every cluster name
 * is answered by the kubernetes plugin. `cacheClusterZone` drops those two
 * lines: a plain `cache 30`, which also caches cluster names (their answers
 * for the TTL, NXDOMAIN for the SOA's minimum, which is the TTL).
 */

/** What {@link corefile} renders. */
export interface CorefileSpec {
  /** The address to listen on, port 53. */
  readonly address: string;
  /** The cluster domain. */
  readonly zone: string;
  /** The kubeconfig of the API server. */
  readonly kubeconfig: string;
  /** The records' TTL, s. */
  readonly ttl: number;
  /** The upstream of other names, `IP[:PORT]`. */
  readonly upstream: string;
  /** Cache the cluster domain too (a plain `cache 30`). */
  readonly cacheClusterZone: boolean;
}

/**
 * The Corefile of {@link CorefileSpec}. Pure.
 * @throws Error naming the field when a value would break the Corefile's syntax (a space, brace or newline).
 */
export function corefile(spec: CorefileSpec): string {
  for (const [field, value] of Object.entries({ address: spec.address, zone: spec.zone, kubeconfig: spec.kubeconfig, upstream: spec.upstream })) {
    if (value === '' || /[\s{}"#]/.test(value)) throw new Error(`Corefile: ${field} ${JSON.stringify(value)} is empty or holds a space, brace, quote or #`);
  }
  if (!Number.isInteger(spec.ttl) || spec.ttl < 0 || spec.ttl > 3600) throw new Error(`Corefile: ttl ${spec.ttl} is not a whole number of seconds from 0 to 3600`);
  const cache = spec.cacheClusterZone ? ['    cache 30'] : ['    cache 30 {', `       disable success ${spec.zone}`, `       disable denial ${spec.zone}`, '    }'];
  return [
    '.:53 {',
    `    bind ${spec.address}`,
    '    errors',
    '    health {',
    '       lameduck 5s',
    '    }',
    '    ready',
    `    kubernetes ${spec.zone} in-addr.arpa ip6.arpa {`,
    `       kubeconfig ${spec.kubeconfig}`,
    '       pods insecure',
    '       fallthrough in-addr.arpa ip6.arpa',
    `       ttl ${spec.ttl}`,
    '    }',
    '    prometheus :9153',
    `    forward . ${spec.upstream} {`,
    '       max_concurrent 1000',
    '    }',
    ...cache,
    '    loadbalance',
    '}',
    '',
  ].join('\n');
}
