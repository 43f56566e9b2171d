/** Where the Services' health checks listen, from --nodeport-addresses and the host's interfaces. */
import test from 'ava';
import type { NetworkInterfaceInfo } from 'node:os';
import { nodePortAddressesArg } from '../../src/cli/options.ts';
import { healthCheckAddresses, type Interfaces } from '../../src/server/node-addresses.ts';

function iface(address: string): NetworkInterfaceInfo {
  const v4 = !address.includes(':');
  return v4
    ? { address, netmask: '255.255.255.0', family: 'IPv4', mac: '00:00:00:00:00:00', internal: false, cidr: `${address}/24` }
    : { address, netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6', mac: '00:00:00:00:00:00', internal: false, cidr: `${address}/64`, scopeid: 0 };
}

const HOST: Interfaces = {
  lo: [iface('127.0.0.1'), iface('::1')],
  eth0: [iface('10.1.2.3'), iface('fd00::3')],
  eth1: [iface('192.168.7.20'), iface('10.1.2.3')],
};

const listen = (flag: string | undefined) => healthCheckAddresses(flag === undefined ? undefined : nodePortAddressesArg(flag), HOST).map((a) => a.text);

test('without --nodeport-addresses, or with 0.0.0.0/0, the health checks listen on every address', (t) => {
  t.deepEqual(listen(undefined), ['0.0.0.0']);
  t.deepEqual(listen(''), ['0.0.0.0']);
  t.deepEqual(listen('10.0.0.0/8,0.0.0.0/0'), ['0.0.0.0']);
});

test("with CIDRs, on this node's IPv4 addresses in them, each once, in address order; IPv6 CIDRs are left out", (t) => {
  t.deepEqual(listen('192.168.0.0/16, 10.0.0.0/8'), ['10.1.2.3', '192.168.7.20']);
  t.deepEqual(listen('127.0.0.0/8'), ['127.0.0.1']);
  t.deepEqual(listen('10.1.2.9/24'), ['10.1.2.3'], 'host bits are ignored, as kube-proxy ignores them');
  t.deepEqual(listen('fd00::/64'), ['0.0.0.0'], 'only IPv6 CIDRs: kube-proxy adds 0.0.0.0/0 for IPv4, so every address');
  t.deepEqual(listen('172.16.0.0/12'), []);
});

test('--nodeport-addresses refuses what is not a CIDR, naming it, and primary beside CIDRs', (t) => {
  t.throws(() => nodePortAddressesArg('10.0.0.0/8,nonsense'), { message: '"nonsense" is not a CIDR (e.g. 10.0.0.0/8) or primary' });
  t.throws(() => nodePortAddressesArg('10.0.0.0/8,primary'), { message: '"10.0.0.0/8,primary": primary stands alone, without CIDRs' });
  t.true(nodePortAddressesArg('primary').primary);
  t.throws(() => nodePortAddressesArg('10.0.0.0/33'), { message: /"10.0.0.0\/33" is not a CIDR/ });
  t.throws(() => nodePortAddressesArg('10.0.0.1'), { message: /is not a CIDR/ });
  t.deepEqual(nodePortAddressesArg('10.0.0.0/8,10.0.0.0/8').map((c) => c.text), ['10.0.0.0/8']);
});
