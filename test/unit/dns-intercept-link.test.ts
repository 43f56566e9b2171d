/**
 * Where `--dns-intercept-cluster-dns` puts the cluster DNS ClusterIP
 * (src/dns/node-dns.ts bindIntercepted, unbindIntercepted), on in-memory
 * links: the dummy link drover-cdns0 holding it alone, or, without the
 * dummy driver, lo with the label lo:drover-cdns; and its removal. The
 * addresses are documentation ones (RFC 5737, RFC 3849): bindIntercepted
 * also reads the host's own interfaces, which must not hold them.
 */
import test from 'ava';
import { pino } from 'pino';
import { bindIntercepted, INTERCEPT_LABEL, INTERCEPT_LINK, unbindIntercepted } from '../../src/dns/node-dns.ts';
import { FakeLinks } from '../../src/kernel/rtnetlink/fake.ts';

const logger = pino({ level: 'silent' });

test('on drover-cdns0: the ClusterIP alone (an earlier one removed), then the link deleted', async (t) => {
  const links = new FakeLinks();
  await bindIntercepted('192.0.2.99', links, logger);
  await bindIntercepted('192.0.2.10', links, logger);
  t.deepEqual(links.addressesOf(INTERCEPT_LINK), ['192.0.2.10/32']);
  t.deepEqual(links.log, ['create drover-cdns0', 'add 192.0.2.99/32', 'add 192.0.2.10/32', 'del 192.0.2.99/32']);
  t.deepEqual(await unbindIntercepted(links), { links: 1, addresses: 0 });
  t.is(links.addressesOf(INTERCEPT_LINK), undefined);
  t.deepEqual(await unbindIntercepted(links), { links: 0, addresses: 0 });
});

test('without the dummy driver: on lo, labelled, so that only it is removed; IPv6 is refused', async (t) => {
  const links = new FakeLinks({ noDummy: true });
  await bindIntercepted('192.0.2.99', links, logger);
  await bindIntercepted('192.0.2.10', links, logger);
  t.deepEqual(links.addressesOf('lo'), ['127.0.0.1/8', '192.0.2.10/32']);
  t.deepEqual((await links.labelled(INTERCEPT_LABEL)).map((a) => a.address), ['192.0.2.10']);
  t.deepEqual(await unbindIntercepted(links), { links: 0, addresses: 1 });
  t.deepEqual(links.addressesOf('lo'), ['127.0.0.1/8']);
  await t.throwsAsync(() => bindIntercepted('2001:db8::a', links, logger), { message: /ENOTSUP/ });
});
