/** The Shepherd source against a test double of Shepherd's API server, on loopback. */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { allocateClusterIPs } from '../../src/model/allocate.ts';
import { parseCIDR } from '../../src/model/validate.ts';
import { Proxier } from '../../src/proxier/proxier.ts';
import { AllocationStateFile } from '../../src/sources/allocation-state.ts';
import { ShepherdSource, type ShepherdSourceOptions } from '../../src/sources/shepherd.ts';
import { readShepherd, shepherdBaseURL } from '../../src/sources/shepherd-api.ts';
import { silentLogger } from '../../src/util/log.ts';
import { RecordingBackend } from '../support/recording-backend.ts';
import { FakeShepherd, shepherdService } from '../support/shepherd-api.ts';
import { recordingLogger, renderAll } from './model-helpers.ts';

const web = (endpoints: string[]) => shepherdService('default', 'web', [{ name: 'http', port: 80, target_port: 8080, protocol: 'tcp' }], endpoints);
const api = (endpoints: string[]) =>
  shepherdService('shop', 'api', [{ name: 'http', port: 80, target_port: 8080 }, { name: 'dns', port: 53, target_port: 5353, protocol: 'udp' }], endpoints);

async function fake(t: ExecutionContext, opts: { token?: string } = {}): Promise<FakeShepherd> {
  const server = await FakeShepherd.start(opts);
  t.teardown(() => server.stop().catch(() => undefined));
  return server;
}

function source(t: ExecutionContext, server: FakeShepherd, opts: Partial<ShepherdSourceOptions> = {}): ShepherdSource {
  const src = new ShepherdSource({ baseURL: server.url, serviceCIDR: '10.96.0.0/12', logger: silentLogger(), timeoutMs: 2000, ...opts });
  t.teardown(() => src.close());
  return src;
}

/** Service ports with their ClusterIPs masked (allocation is tested apart). */
const rendered = (snapshot: Parameters<typeof renderAll>[0]) => renderAll(snapshot).map((l) => l.replace(/^(\S+) \S+:/, '$1 IP:'));

test('every namespace is listed; Shepherd Services become service ports with their endpoints', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080', '10.20.0.3:8080'])]);
  server.set('shop', [api(['10.20.1.2:8080', '10.20.1.2:5353'])]);
  const r = await source(t, server).load();
  t.deepEqual(r.errors, []);
  t.deepEqual(r.incomplete, []);
  t.deepEqual(rendered(r.snapshot), [
    'default/web:http IP:80/TCP -> 10.20.0.2:8080 10.20.0.3:8080',
    'shop/api:dns IP:53/UDP -> 10.20.1.2:5353',
    'shop/api:http IP:80/TCP -> 10.20.1.2:8080',
  ]);
  t.true([...r.snapshot.services.values()].every((sp) => sp.clusterIPAllocated));
  t.deepEqual(
    server.requests.map((q) => q.path).sort(),
    ['/api/v1/namespaces', '/api/v1/namespaces/default/services', '/api/v1/namespaces/shop/services'],
  );
  t.true(server.requests.every((q) => q.authorization === undefined), 'no token, no Authorization header');
});

test('a token is sent as a bearer token; without it a server that demands one answers 401, named in the error', async (t) => {
  const server = await fake(t, { token: 's3cret' });
  server.set('default', [web(['10.20.0.2:8080'])]);
  const err = await t.throwsAsync(source(t, server).load());
  t.is(err?.message, `${server.url}/api/v1/namespaces: HTTP 401 "unauthorized"; set SHEPHERD_API_TOKEN`);

  const wrong = await t.throwsAsync(source(t, server, { token: 'guess' }).load());
  t.is(wrong?.message, `${server.url}/api/v1/namespaces: HTTP 401 "unauthorized"; check SHEPHERD_API_TOKEN`);

  server.requests.length = 0;
  const r = await source(t, server, { token: 's3cret' }).load();
  t.deepEqual(rendered(r.snapshot), ['default/web:http IP:80/TCP -> 10.20.0.2:8080']);
  t.true(server.requests.length >= 2);
  t.true(server.requests.every((q) => q.authorization === 'Bearer s3cret'));
});

test('a token that cannot be sent in a header is refused at start, without showing it', async (t) => {
  const server = await fake(t, { token: 'secret' });
  for (const token of ['sec\r\nret', 'sec\u0000ret', 'sec\u20acret']) {
    let err: Error | undefined;
    try {
      await source(t, server, { token }).load();
    } catch (e) {
      err = e as Error;
    }
    t.regex(err?.message ?? '', /^SHEPHERD_API_TOKEN: character 4 cannot be sent in an HTTP header/);
    t.false(err?.message.includes('sec'), 'the token is not in the message');
  }
});

test('empty lists encoded as null: a namespace with no Services, a Service with no endpoints', async (t) => {
  const server = await fake(t);
  server.set('shop', [shepherdService('shop', 'idle', [{ port: 80, target_port: 8080 }])]);
  const r = await source(t, server).load();
  t.deepEqual(r.errors, []);
  // "default" answers null; the idle Service has no status.endpoints at all.
  t.deepEqual(rendered(r.snapshot), ['shop/idle IP:80/TCP ->']);
  const raw = await (await fetch(`${server.url}/api/v1/namespaces/default/services`)).text();
  t.is(raw, 'null\n', 'the double answers an empty list as Shepherd does');
});

test('one changed Service: changed names only its service ports', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080'])]);
  server.set('shop', [api(['10.20.1.2:8080', '10.20.1.2:5353'])]);
  const src = source(t, server);
  t.is((await src.load()).changed, undefined, 'the first load cannot tell');
  t.deepEqual([...((await src.load()).changed ?? ['?'])], [], 'nothing changed');

  server.set('shop', [api(['10.20.1.2:8080', '10.20.1.3:8080', '10.20.1.2:5353'])]);
  const r = await src.load();
  t.deepEqual([...(r.changed ?? ['?'])], ['shop/api:http']);
  t.deepEqual(rendered(r.snapshot).filter((l) => l.startsWith('shop/api:http')), ['shop/api:http IP:80/TCP -> 10.20.1.2:8080 10.20.1.3:8080']);

  server.set('default', []);
  t.deepEqual([...((await src.load()).changed ?? ['?'])], ['default/web:http'], 'a deleted Service (its namespace gone from the list) is a change');
});

test('a server that goes away keeps the last good state and deletes nothing; once back, it is read whole again', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080'])]);
  server.set('shop', [api(['10.20.1.2:8080', '10.20.1.2:5353'])]);
  const backend = new RecordingBackend();
  const proxier = new Proxier({ source: source(t, server), backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  await proxier.syncOnce();

  await server.stop();
  await proxier.syncOnce();
  // The first request may still go out on the connection the server dropped.
  t.is(proxier.last?.incomplete.length, 1);
  t.regex(proxier.last?.incomplete[0] ?? '', /\/api\/v1\/namespaces: (cannot connect \(ECONNREFUSED\)|the server closed the connection); keeping the Services last read$/);
  await proxier.syncOnce();
  t.deepEqual(proxier.last?.incomplete, [`${server.url}/api/v1/namespaces: cannot connect (ECONNREFUSED); keeping the Services last read`]);

  // Back, without web: the first whole read deletes it.
  server.set('default', []);
  await server.restart();
  await proxier.syncOnce();
  t.deepEqual(proxier.last?.incomplete, []);
  t.deepEqual(backend.calls, [
    { services: ['default/web:http', 'shop/api:dns', 'shop/api:http'], full: true, changed: [], incomplete: false },
    { services: ['default/web:http', 'shop/api:dns', 'shop/api:http'], full: false, changed: [], incomplete: true },
    { services: ['default/web:http', 'shop/api:dns', 'shop/api:http'], full: false, changed: [], incomplete: true },
    { services: ['shop/api:dns', 'shop/api:http'], full: false, changed: ['default/web:http'], incomplete: false },
  ]);
});

test('a slow server or one that answers garbage keeps the last good state; before any good answer the load is rejected', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080'])]);
  const src = source(t, server, { timeoutMs: 2000 });

  server.answer = 'garbage';
  const err = await t.throwsAsync(src.load());
  t.regex(err?.message ?? '', new RegExp(`^${server.url}/api/v1/namespaces: answer is not JSON: `));

  server.answer = 'ok';
  const good = await src.load();
  t.deepEqual(good.incomplete, []);

  server.answer = 'garbage';
  const bad = await src.load();
  t.is(bad.snapshot, good.snapshot, 'the snapshot is the one read last');
  t.deepEqual([...(bad.changed ?? ['?'])], []);
  t.is(bad.incomplete.length, 1);
  t.regex(bad.incomplete[0]!, /answer is not JSON: .*; keeping the Services last read$/);

  server.answer = 'slow';
  const slow = await src.load();
  t.is(slow.snapshot, good.snapshot);
  t.deepEqual(slow.incomplete, [`${server.url}/api/v1/namespaces: no answer within 2000 ms; keeping the Services last read`]);
});

test('a namespace whose service list fails keeps its Services; the others follow the server', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080'])]);
  server.set('shop', [api(['10.20.1.2:8080', '10.20.1.2:5353'])]);
  const src = source(t, server);
  await src.load();

  server.failing.add('shop');
  server.set('default', [web(['10.20.0.9:8080'])]);
  const r = await src.load();
  t.deepEqual(r.incomplete, [`${server.url}/api/v1/namespaces/shop/services: HTTP 500 "list services: store is closed"; keeping the Services last read from it`]);
  t.deepEqual(rendered(r.snapshot), [
    'default/web:http IP:80/TCP -> 10.20.0.9:8080',
    'shop/api:dns IP:53/UDP -> 10.20.1.2:5353',
    'shop/api:http IP:80/TCP -> 10.20.1.2:8080',
  ]);
  t.deepEqual([...(r.changed ?? ['?'])], ['default/web:http']);
});

test('an invalid Service keeps its last valid version and names the URL, the object and the field; a bad endpoint entry is dropped alone', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080'])]);
  const src = source(t, server);
  await src.load();
  const list = `${server.url}/api/v1/namespaces/default/services`;

  server.set('default', [
    shepherdService('default', 'web', [{ name: 'http', port: 70000, target_port: 8080 }], ['10.20.0.3:8080']),
    shepherdService('default', 'db', [{ port: 5432, target_port: 5432 }], ['10.20.0.7:5432', '10.20.0.777:5432']),
  ]);
  const r = await src.load();
  t.deepEqual(r.incomplete, [`${list}: Service default/web: spec.ports[0].port: 70000 is out of range 1-65535; keeping the last valid version`]);
  t.deepEqual(r.warnings.map((w) => w.message), [`${list}: Service default/db: status.endpoints[1]: "10.20.0.777:5432": "10.20.0.777" is not a valid IPv4 address; entry ignored`]);
  t.deepEqual(rendered(r.snapshot), ['default/db IP:5432/TCP -> 10.20.0.7:5432', 'default/web:http IP:80/TCP -> 10.20.0.2:8080']);
});

test('while watching, a poll that changes nothing asks for no sync; one that changes something, or fails, does', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080'])]);
  const src = source(t, server, { pollIntervalMs: 50 });
  await src.load();
  let calls = 0;
  src.watch(() => calls++);
  const polls = () => server.requests.filter((q) => q.path === '/api/v1/namespaces').length;
  const waitPolls = async (n: number) => {
    const until = polls() + n;
    while (polls() < until) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 30)); // the poll's service lists
  };
  await waitPolls(4);
  t.is(calls, 0, 'unchanged polls ask for nothing');

  server.set('default', [web(['10.20.0.2:8080', '10.20.0.3:8080'])]);
  await waitPolls(2);
  t.is(calls, 1);
  await waitPolls(2);
  t.is(calls, 1, 'the change is pending until a load applies it; it is asked for once');
  const r = await src.load();
  t.deepEqual([...(r.changed ?? ['?'])], ['default/web:http']);

  server.answer = 'garbage';
  await waitPolls(2);
  t.is(calls, 2, 'a server that starts failing is a change (the status must say so)');
  t.is((await src.load()).incomplete.length, 1);
  await waitPolls(2);
  t.is(calls, 2, 'the same failure again is not');
});

test('the proxier gets no sync request from polls that change nothing', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080'])]);
  const backend = new RecordingBackend();
  const proxier = new Proxier({ source: source(t, server, { pollIntervalMs: 50 }), backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  await proxier.start();
  t.teardown(() => proxier.stop());
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
  while (backend.calls.length === 0) await wait(10);
  await wait(400);
  t.is(backend.calls.length, 1, 'only the first sync');
  server.set('default', [web(['10.20.0.3:8080'])]);
  while (backend.calls.length === 1) await wait(10);
  t.deepEqual(backend.calls[1], { services: ['default/web:http'], full: false, changed: ['default/web:http'], incomplete: false });
});

test('the allocation state file keeps two colliding Services on their addresses across a restart', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-shepherd-state-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // A /30 has two usable addresses: find two names whose hash candidates collide.
  const cidr = '10.96.0.0/30';
  const names = findColliding(cidr);
  const [first, second] = names; // `first` sorts before `second`
  const svc = (name: string) => shepherdService('default', name, [{ port: 80, target_port: 8080 }], ['10.20.0.2:8080']);
  const ipOf = (r: { snapshot: { services: ReadonlyMap<string, { clusterIP: string }> } }, name: string) => r.snapshot.services.get(`default/${name}`)?.clusterIP;

  const server = await fake(t);
  // The first drover sees `second` alone: it takes the shared candidate; `first` arrives later and probes on.
  server.set('default', [svc(second)]);
  const state1 = AllocationStateFile.open(dir, { logger: silentLogger(), writable: true });
  const one = source(t, server, { serviceCIDR: cidr, allocations: state1 });
  await one.load();
  server.set('default', [svc(first), svc(second)]);
  const before = await one.load();
  await state1.idle();
  one.close();
  const a = ipOf(before, first);
  const b = ipOf(before, second);
  t.truthy(a);
  t.not(a, b);

  // The second drover starts with both, listed the other way round.
  server.set('default', [svc(second), svc(first)]);
  const two = source(t, server, { serviceCIDR: cidr, allocations: AllocationStateFile.open(dir, { logger: silentLogger(), writable: true }) });
  const after = await two.load();
  t.is(ipOf(after, first), a);
  t.is(ipOf(after, second), b);

  // Without the state file the addresses would swap: the test can tell.
  const fresh = await source(t, server, { serviceCIDR: cidr }).load();
  t.is(ipOf(fresh, first), b);
  t.is(ipOf(fresh, second), a);
});

test('a --source URL must be shepherd+http(s)://HOST:PORT', (t) => {
  t.is(shepherdBaseURL('shepherd+http://10.0.0.1:9876'), 'http://10.0.0.1:9876');
  t.is(shepherdBaseURL('shepherd+https://shepherd.example:443/prefix/'), 'https://shepherd.example/prefix');
  t.is(t.throws(() => shepherdBaseURL('shepherd+ftp://x'))?.message, '--source "shepherd+ftp://x": unsupported scheme ftp (expected shepherd+http://HOST:PORT or shepherd+https://HOST:PORT)');
  t.regex(t.throws(() => shepherdBaseURL('shepherd+http://u:p@x:1'))?.message ?? '', /credentials in the URL are not supported; set SHEPHERD_API_TOKEN/);
});

test('a failure is logged when it starts, not at every load while it lasts', async (t) => {
  const server = await fake(t);
  server.set('default', [web(['10.20.0.2:8080'])]);
  const { logger, lines } = recordingLogger();
  const src = source(t, server, { logger });
  await src.load();
  server.answer = 'garbage';
  await src.load();
  await src.load();
  const failures = lines.filter((l) => l.msg.startsWith('cannot read the Shepherd API server'));
  t.is(failures.length, 1);
  t.is(failures[0]!.level, 40);
});

/** Two service names whose hash candidates are the same address of `cidr`, sorted. */
function findColliding(cidr: string): [string, string] {
  const parsed = parseCIDR(cidr);
  const alone = (name: string) => allocateClusterIPs({ cidr: parsed, keys: [`default/${name}`], taken: [], previous: new Map() }).allocated.get(`default/${name}`);
  const seen = new Map<string, string>();
  for (let i = 0; ; i++) {
    const name = `svc-${i}`;
    const ip = alone(name)!;
    const other = seen.get(ip);
    if (other !== undefined) return [other, name].sort() as [string, string];
    seen.set(ip, name);
  }
}

test('an answer larger than the limit is a failed request, not read to its end, whether its length is declared or streamed', async (t) => {
  let streamed = 0;
  const server = createServer((req, res) => {
    if (req.url === '/api/v1/namespaces') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ namespaces: ['declared', 'streamed', 'small'] }));
    } else if (req.url === '/api/v1/namespaces/declared/services') {
      const body = `[${'"x",'.repeat(60_000)}"x"]`;
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    } else if (req.url === '/api/v1/namespaces/streamed/services') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('[');
      // 4 MiB in chunks of 64 KiB, unless the client goes away first.
      const timer = setInterval(() => {
        if (streamed >= 4 * 1024 * 1024) {
          clearInterval(timer);
          res.end('"x"]');
          return;
        }
        streamed += 64 * 1024;
        res.write(`${'"x",'.repeat(16 * 1024)}`);
      }, 2);
      res.on('close', () => clearInterval(timer));
    } else {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('\ufeffnull');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const read = await readShepherd({ baseURL: url, timeoutMs: 5000, maxBytes: 100_000 });
  const ns = read.namespaces!;
  t.is(ns.get('declared')?.error?.message, `${url}/api/v1/namespaces/declared/services: answer larger than 100000 bytes; not read`);
  t.is(ns.get('streamed')?.error?.message, `${url}/api/v1/namespaces/streamed/services: answer larger than 100000 bytes; not read`);
  t.deepEqual(ns.get('small')?.items, [], 'a small answer is read (with its byte order mark)');
  t.true(streamed < 1_000_000, `the streamed answer was given up early (${streamed} bytes sent)`);
});

test('a Service whose namespace cannot be read at a restart keeps its recorded ClusterIP: a newcomer does not take it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-shepherd-state-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const svc = (ns: string, name: string) => shepherdService(ns, name, [{ port: 80, target_port: 8080 }], ['10.20.0.2:8080']);
  const ipOf = (r: { snapshot: { services: ReadonlyMap<string, { clusterIP: string }> } }, key: string) => r.snapshot.services.get(key)?.clusterIP;
  // default/c726183's hash candidate in 10.96.0.0/12 is shop/b's: 10.102.31.252.
  const server = await fake(t);
  server.set('shop', [svc('shop', 'b')]);
  const open = () => AllocationStateFile.open(dir, { logger: silentLogger(), writable: true });
  const runOnce = async () => {
    const state = open();
    const r = await source(t, server, { allocations: state }).load();
    await state.idle();
    return r;
  };
  t.is(ipOf(await runOnce(), 'shop/b'), '10.102.31.252');
  // Restart while shop's list fails, with a newcomer whose candidate is b's address.
  server.failing.add('shop');
  server.set('default', [svc('default', 'c726183')]);
  const during = await runOnce();
  t.true(during.incomplete.length > 0);
  t.not(ipOf(during, 'default/c726183'), '10.102.31.252', 'the newcomer does not take the address recorded for shop/b');
  // Restart once shop answers again: b has its address back.
  server.failing.delete('shop');
  t.is(ipOf(await runOnce(), 'shop/b'), '10.102.31.252');
  // Deleted while no drover ran: the first whole read forgets its record, and its address is free again.
  server.set('shop', []);
  t.deepEqual((await runOnce()).incomplete, []);
  const recorded = (JSON.parse(await readFile(join(dir, 'allocations.json'), 'utf8')) as { allocations: Record<string, string> }).allocations;
  t.deepEqual(Object.keys(recorded), ['default/c726183']);
});
