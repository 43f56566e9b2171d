/** kube-ipvs0: the address diff, and the fake link manager. */
import test from 'ava';
import { FakeLinks } from '../../src/kernel/rtnetlink/fake.ts';
import { DUMMY_INTERFACE, planAddresses } from '../../src/kernel/rtnetlink/link.ts';

test('address diff: bind missing ClusterIPs, unbind everything else on kube-ipvs0', (t) => {
  const plan = planAddresses(
    ['10.96.0.10', '10.96.0.2', '10.96.0.11'],
    [
      { address: '10.96.0.10', prefixLength: 32 },
      { address: '10.96.0.99', prefixLength: 32 },
      { address: '10.96.0.11', prefixLength: 24 },
    ],
  );
  t.deepEqual(plan.add, ['10.96.0.2', '10.96.0.11']);
  t.deepEqual(plan.remove, [
    { address: '10.96.0.11', prefixLength: 24 },
    { address: '10.96.0.99', prefixLength: 32 },
  ]);
});

test('address diff: nothing to do when equal', (t) => {
  t.deepEqual(planAddresses(['10.96.0.10'], [{ address: '10.96.0.10', prefixLength: 32 }]), { add: [], remove: [] });
});

test('fake links: the dummy link is created once, addresses are validated', async (t) => {
  const links = new FakeLinks();
  const a = await links.ensureDummy(DUMMY_INTERFACE);
  const b = await links.ensureDummy(DUMMY_INTERFACE);
  t.deepEqual([a.created, b.created, a.index === b.index], [true, false, true]);
  await links.addAddress(a.index, '10.96.0.10');
  await t.throwsAsync(links.addAddress(a.index, '10.96.0.1/8'));
  t.deepEqual(links.addressesOf(DUMMY_INTERFACE), ['10.96.0.10/32']);
});
