/**
 * The pure pieces of the DNS bench (scripts/dns-bench/): the CPU lists it
 * pins the server and the client side with.
 */
import test from 'ava';
import { clientCpus, formatCpuList, parseCpuList } from '../../scripts/dns-bench/cpus.ts';

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
