/**
 * The pure pieces of the DNS bench (scripts/dns-bench/): the CPU lists it
 * pins the server and the client side with, and the Corefile CoreDNS runs
 * with beside drover.
 */
import test from 'ava';
import { clientCpus, formatCpuList, parseCpuList } from '../../scripts/dns-bench/cpus.ts';
import { corefile } from '../../scripts/dns-bench/corefile.ts';

test('a CPU list reads numbers and ranges, and is written back with consecutive CPUs as ranges', (t) => {
  t.deepEqual(parseCpuList('0'), [0]);
  t.deepEqual(parseCpuList('0-3,6\n'), [0, 1, 2, 3, 6]);
  t.deepEqual(parseCpuList('5,1-2,2'), [1, 2, 5]);
  t.is(formatCpuList([0, 1, 2, 5, 7, 8]), '0-2,5,7-8');
  t.is(formatCpuList([3]), '3');
  t.throws(() => parseCpuList('0-'), { message: /"0-" is not a CPU number or a range/ });
  t.throws(() => parseCpuList('3-1'), { message: /the range 3-1 runs backwards/ });
});

test('the client gets every online CPU but the server\'s, and a machine with none left is refused', (t) => {
  t.is(clientCpus('0-1\n', '1'), '0');
  t.is(clientCpus('0-1\n', '0'), '1');
  t.is(clientCpus('0-7\n', '2-3'), '0-1,4-7');
  t.throws(() => clientCpus('0\n', '0'), { message: /no CPU is left for the client beside the server's 0 \(online: 0\): give --client-cpu/ });
});

const spec = { address: '169.254.20.10', zone: 'cluster.local', kubeconfig: '/tmp/api/admin.kubeconfig', ttl: 5, upstream: '127.0.0.1:9', cacheClusterZone: false } as const;

test("CoreDNS gets kubeadm's Corefile, bound to the bench's address, its cache leaving the cluster domain out", (t) => {
  t.is(
    corefile(spec),
    `.:53 {
    bind 169.254.20.10
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       kubeconfig /tmp/api/admin.kubeconfig
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 5
    }
    prometheus :9153
    forward . 127.0.0.1:9 {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loadbalance
}
`,
  );
});

test('with cacheClusterZone the cache is a plain cache 30, and nothing else changes', (t) => {
  const plain = corefile({ ...spec, cacheClusterZone: true });
  t.is(plain, corefile(spec).replace('    cache 30 {\n       disable success cluster.local\n       disable denial cluster.local\n    }\n', '    cache 30\n'));
  t.true(plain.includes('\n    cache 30\n    loadbalance\n'));
});

test('a value that would break the Corefile is refused by field', (t) => {
  t.throws(() => corefile({ ...spec, kubeconfig: '/tmp/a b' }), { message: /kubeconfig "\/tmp\/a b" is empty or holds a space/ });
  t.throws(() => corefile({ ...spec, zone: 'cluster.local}' }), { message: /zone "cluster.local}"/ });
  t.throws(() => corefile({ ...spec, address: '' }), { message: /address ""/ });
  t.throws(() => corefile({ ...spec, ttl: 2.5 }), { message: /ttl 2.5 is not a whole number/ });
});
