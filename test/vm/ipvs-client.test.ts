/**
 * drover's IPVS netlink client against the real kernel, in a fresh network
 * namespace of the guest: what ipvsadm made by hand is decoded exactly, and
 * 2,000 commands in a row go through its bounded pipeline without a loss.
 * 2,000 is enough to show the bound: sent all at once, their acks would not
 * fit in the socket's receive buffer (the netlink package aborts the
 * process on that overflow; see src/kernel/ipvs/client.ts), and the test
 * checks that against the buffer the kernel really gave.
 */
import test from 'ava';
import { run } from '../../src/testbed/exec.ts';
import { createNetns } from '../../src/testbed/netns.ts';
import { Driver } from './support/driver-client.ts';
import { ipvsadmState, registerIpvsTests } from './support/env.ts';

interface Dumped {
  services: { service: Record<string, unknown>; dests: Record<string, unknown>[] }[];
  unsupported: string[];
}

const strip = <T extends Record<string, unknown>>(o: T): Omit<T, 'stats'> => {
  const { stats: _stats, ...rest } = o;
  return rest;
};

let ns: Awaited<ReturnType<typeof createNetns>> | undefined;
let driver: Driver | undefined;

if (await registerIpvsTests('IPVS client tests')) {
  // One namespace and one driver for both tests: a driver is a Node start, seconds under emulation.
  test.before(async () => {
    ns = await createNetns();
    // IPVS refuses a real server whose address type it cannot tell (EINVAL):
    // a namespace needs its local routing table, which lo brings.
    await run('ip', ['-n', ns.name, 'link', 'set', 'lo', 'up']);
    driver = await Driver.start(ns.name);
  });

  test.after.always(async () => {
    await driver?.stop();
    await ns?.remove();
  });

  test.serial('virtual and real servers made by hand with ipvsadm, IPv6 ones too, are decoded exactly', async (t) => {
    await run('ipvsadm', ['-R'], {
      netns: ns!.name,
      input: [
        '-A -t 10.96.5.5:8080 -s wlc -p 600 -M 255.255.255.0',
        '-a -t 10.96.5.5:8080 -r 10.244.5.5:80 -m -w 7 -x 100 -y 50',
        '-a -t 10.96.5.5:8080 -r 10.244.5.6:80 -g -w 0',
        '-A -u 10.96.0.53:53 -s rr',
        '-a -u 10.96.0.53:53 -r 10.244.2.2:53 -m -w 1',
        '-A -f 42 -s rr',
        '-A -t [fd00::1]:80 -s rr',
        '',
      ].join('\n'),
    });
    const dump = await driver!.request<Dumped>('dump');
    const got = dump.services
      .map((s) => ({ service: strip(s.service), dests: s.dests.map(strip).sort((a, b) => String(a.address).localeCompare(String(b.address))) }))
      .sort((a, b) => String(a.service.address).localeCompare(String(b.service.address)));
    t.deepEqual(got, [
      {
        service: { protocol: 'UDP', address: '10.96.0.53', port: 53, scheduler: 'rr', netmask: 0xffffffff, flags: 2 },
        dests: [{ address: '10.244.2.2', port: 53, weight: 1, forwarding: 'masq', upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, persistConns: 0 }],
      },
      {
        service: { protocol: 'TCP', address: '10.96.5.5', port: 8080, scheduler: 'wlc', persistent: { timeoutSeconds: 600 }, netmask: 0xffffff00, flags: 3 },
        dests: [
          { address: '10.244.5.5', port: 80, weight: 7, forwarding: 'masq', upperThreshold: 100, lowerThreshold: 50, activeConns: 0, inactiveConns: 0, persistConns: 0 },
          // Direct routing keeps the virtual server's port (ipvsadm sets it).
          { address: '10.244.5.6', port: 8080, weight: 0, forwarding: 'route', upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, persistConns: 0 },
        ],
      },
      // ipvsadm's IPv6 service: AF_INET6, and its default persistence granularity, prefix length 128, read host-endian.
      { service: { protocol: 'TCP', address: 'fd00::1', port: 80, scheduler: 'rr', netmask: 128, flags: 2 }, dests: [] },
    ]);
    t.is(dump.unsupported.length, 1, 'the fwmark service is listed as unsupported, not decoded');
    t.true(dump.unsupported.some((u) => /firewall-mark service 42/.test(u)));
  });

  test.serial('2,000 IPVS commands in a row, more than the receive buffer could hold the acks of, all succeed through the bounded pipeline', async (t) => {
    const netns = ns!.name;
    // What the test before made by hand goes first.
    await run('ipvsadm', ['-C'], { netns });
    const r = await driver!.request<{ commands: number; ms: number; failures: string[]; services: number; dests: number; recvBufferBytes: number }>('bulk', { services: 20, dests: 99 });
    t.is(r.commands, 2000);
    // Each ack takes well over 256 bytes of the buffer (its sk_buff alone is more): the acks of every command at
    // once would overflow it, so only the pipeline's bound (64 in flight) lets them all through.
    t.true(r.commands * 256 > r.recvBufferBytes, `SO_RCVBUF ${r.recvBufferBytes} bytes would hold the acks of ${r.commands} commands: use more`);
    t.deepEqual(r.failures, []);
    t.is(r.services, 20);
    t.is(r.dests, 1980);
    const listed = await ipvsadmState(netns);
    t.is(listed.filter((l) => l.startsWith('TCP ')).length, 20, 'ipvsadm agrees: 20 virtual servers');
    t.is(listed.filter((l) => l.startsWith('-> ')).length, 1980, 'ipvsadm agrees: 1,980 real servers');
    t.log(`2,000 commands in ${Math.round(r.ms)} ms (TCG-emulated guest), SO_RCVBUF ${r.recvBufferBytes} bytes`);
  });
}
