/**
 * One informer (src/sources/kubernetes/informer.ts) against a scripted
 * HTTP server that answers each list and watch request as a test says:
 * watches the server ends at once, an ERROR event followed by more events
 * on the same stream, a watch whose answer is late while the informer is
 * stopped and started again.
 */
import test, { type ExecutionContext } from 'ava';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKubeConfig } from '../../src/sources/kubernetes/config.ts';
import { ApiException } from '@kubernetes/client-node';
import { describeError, RESOURCES, ResourceInformer, type InformerHandlers, type KubeObject } from '../../src/sources/kubernetes/informer.ts';
import { kubeconfigFor } from '../support/kube-api.ts';
import { until } from '../support/wait.ts';

type Answer = (req: IncomingMessage, res: ServerResponse, query: Record<string, string>) => void;

/** A server on 127.0.0.1 that answers Service lists with `list` and watches with `watch`; counts requests and open sockets. */
async function scripted(list: Answer, watch: Answer) {
  const sockets = new Set<Socket>();
  const seen = { lists: 0, watches: 0 };
  const server = createServer((req, res) => {
    const query = Object.fromEntries(new URL(req.url ?? '/', 'http://x').searchParams);
    if (query.watch === 'true') {
      seen.watches++;
      watch(req, res, query);
    } else {
      seen.lists++;
      list(req, res, query);
    }
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    seen,
    sockets,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A Service list at resourceVersion `rv` with the named Services. */
function listOf(rv: number, ...names: string[]): Answer {
  return (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: 'ServiceList', apiVersion: 'v1', metadata: { resourceVersion: String(rv) }, items: names.map((name) => ({ metadata: { name, namespace: 'default', resourceVersion: String(rv) } })) }));
  };
}

const event = (type: string, object: unknown) => `${JSON.stringify({ type, object })}\n`;
const svc = (name: string, rv: number) => ({ kind: 'Service', apiVersion: 'v1', metadata: { name, namespace: 'default', resourceVersion: String(rv) } });
const gone = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'too old resource version', reason: 'Expired', code: 410 };

let dir: string;
test.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'drover-informer-'));
});
test.after.always(async () => {
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
/** A Service informer for `url` with a 100 ms backoff (and `listTimeoutMs` when given), and what it handed over. */
async function informerFor(url: string, listTimeoutMs?: number) {
  const file = join(dir, `kubeconfig-${n++}`);
  await writeFile(file, kubeconfigFor(url));
  const { config } = loadKubeConfig({ kubeconfig: file });
  const log: string[] = [];
  let pages: string[] = [];
  const handlers: InformerHandlers = {
    upsert: (o: KubeObject) => log.push(`upsert ${o.metadata.name}`),
    remove: (o: KubeObject) => log.push(`remove ${o.metadata.name}`),
    // A list's pages, logged once whole: `replace NAMES`.
    listPage: (items: KubeObject[], first: boolean, last: boolean) => {
      if (first) pages = [];
      pages.push(...items.map((o) => o.metadata.name!));
      if (last) log.push(`replace ${pages.join(',')}`);
    },
    error: (e: Error) => log.push(`error ${e.message}`),
  };
  return { informer: new ResourceInformer(RESOURCES.Service, config, {}, handlers, { initialMs: 100, maxMs: 400 }, listTimeoutMs), log };
}

/** An informer for `server` (see {@link informerFor}), started, and stopped with the server when the test ends. */
async function startedFor(t: ExecutionContext, server: { readonly url: string; close(): Promise<void> }, listTimeoutMs?: number) {
  const made = await informerFor(server.url, listTimeoutMs);
  t.teardown(async () => {
    await made.informer.stop();
    await server.close();
  });
  made.informer.start();
  return made;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Run an informer against a server that lists `web` and answers every watch
 * with `body`: the requests it made in its first second (`inOneSecond`, for
 * an upper bound), then, once `enough` holds of its requests (however long a
 * busy machine takes), stop it: every request it made, and what it handed
 * over.
 * @throws Error when `enough` does not hold within 10 s
 */
async function oneSecondOf(t: ExecutionContext, body: string, enough: (seen: { lists: number; watches: number }) => boolean) {
  const server = await scripted(listOf(10, 'web'), (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(body);
  });
  const { informer, log } = await startedFor(t, server);
  await sleep(1000);
  const inOneSecond = { ...server.seen };
  await until('enough requests', async () => enough(server.seen), 10_000, 10);
  await informer.stop();
  return { inOneSecond, seen: server.seen, log };
}

test.serial('a watch the server ends at once, with no event, is retried after the backoff, not at once in a loop', async (t) => {
  const { inOneSecond, seen } = await oneSecondOf(t, '', (s) => s.watches >= 2);
  // 100 ms doubling to 400 ms: at most 5 watches in a second.
  t.true(inOneSecond.watches <= 6, `${inOneSecond.watches} watches in 1 s`);
  t.true(seen.watches >= 2, 'watched again after the backoff');
});

test.serial('a 410 ERROR event followed by more events on the same stream relists; the events after the ERROR are not handed over', async (t) => {
  let lists = 0;
  const server = await scripted(
    (req, res, q) => listOf(++lists === 1 ? 10 : 20, ...(lists === 1 ? ['web'] : ['web', 'api']))(req, res, q),
    (_req, res, q) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      if (q.resourceVersion === '10') res.end(event('ERROR', gone) + event('ADDED', svc('late', 15)));
      // The watch after the relist stays open.
      else res.flushHeaders();
    },
  );
  const { informer, log } = await startedFor(t, server);
  await until('a relist', async () => server.seen.lists >= 2, 5000, 10);
  await until('the second list handed over', async () => log.includes('replace web,api'), 5000, 10);
  t.deepEqual(log, ['replace web', 'replace web,api']);
});

test.serial('stopped and started again while a watch request is unanswered: the late answer is closed, and after stop() no connection stays open', async (t) => {
  const pending: ServerResponse[] = [];
  const server = await scripted(listOf(10, 'web'), (_req, res) => {
    pending.push(res);
  });
  const { informer } = await informerFor(server.url);
  t.teardown(async () => {
    await informer.stop();
    await server.close();
  });
  const answer = (res: ServerResponse) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.flushHeaders();
  };
  informer.start();
  await until('the first watch request', async () => pending.length === 1, 5000, 10);
  await informer.stop();
  informer.start();
  await until('the second watch request', async () => pending.length === 2, 5000, 10);
  answer(pending[0]!);
  await sleep(100);
  answer(pending[1]!);
  await sleep(100);
  await informer.stop();
  await until('every connection closed', async () => server.sockets.size === 0, 2000, 10).catch(() => undefined);
  t.is(server.sockets.size, 0, 'no watch connection is left open after stop()');
});

test.serial('a server that answers every watch with 410 is listed again after a growing backoff, not in a loop', async (t) => {
  const { inOneSecond, seen, log } = await oneSecondOf(t, event('ERROR', gone), (s) => s.lists >= 3);
  // At once, then after 100, 200, 400 ms: at most 5 lists in a second.
  t.true(inOneSecond.lists <= 6, `${inOneSecond.lists} lists in 1 s`);
  t.true(seen.lists >= 3, `listed again after the backoff (${seen.lists} lists)`);
  t.regex(log.find((l) => l.startsWith('error')) ?? '', /^error watch of Services: 410 Gone \d+ ms after the list it watched from$/);
});

test.serial('a list the server never answers is aborted after the list timeout, reported, and listed again', async (t) => {
  let lists = 0;
  const server = await scripted(
    (req, res) => {
      if (++lists === 1) return; // a connection that died: no answer, ever
      listOf(10, 'web')(req, res, {});
    },
    (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.flushHeaders();
    },
  );
  const { informer, log } = await startedFor(t, server, 300);
  await until('the second list', async () => log.includes('replace web'), 5000);
  t.true(informer.listed);
  t.deepEqual(log, ['error list of Services: no answer within 300 ms', 'replace web']);
  t.is(server.seen.lists, 2);
});

test.serial('a list answer that is not a list ({}, items null, an item without a name) is a failed list, never an empty one that deletes everything', async (t) => {
  const bodies = ['{}', '{"kind":"ServiceList","metadata":{"resourceVersion":"11"},"items":null}', '{"kind":"ServiceList","metadata":{"resourceVersion":"11"},"items":[1]}'];
  let lists = 0;
  let watches = 0;
  const server = await scripted(
    (req, res) => {
      const body = lists++ === 0 ? undefined : bodies[lists - 2];
      if (body === undefined) return listOf(10 + lists, 'web')(req, res, {});
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(body);
    },
    (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      if (watches++ === 0) res.end(event('ERROR', gone)); // the relist gets the garbage
      else res.flushHeaders();
    },
  );
  const { informer, log } = await startedFor(t, server);
  await until('the list after the garbage', async () => log.filter((l) => l.startsWith('replace')).length === 2, 5000);
  t.deepEqual(log, [
    'replace web',
    'error list of Services: the answer has no items list (not a ServiceList)',
    'error list of Services: the answer has no items list (not a ServiceList)',
    'error list of Services: items[0] is not an object with a metadata.name',
    'replace web',
  ]);
});

/** The Status kube-apiserver answers a request its authorizer refused with (verb and resource in its message). */
const forbidden = (verb: string) => ({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message: `services is forbidden: User "system:serviceaccount:kube-system:drover" cannot ${verb} resource "services" in API group "" at the cluster scope`,
  reason: 'Forbidden',
  details: { kind: 'services' },
  code: 403,
});
const refuse = (verb: string): Answer => (_req, res) => {
  res.writeHead(403, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(forbidden(verb)));
};

test("a list the API server refuses (403) is described by the server's message, which names the verb and resource", (t) => {
  // As the typed API throws it: the body is the Status's JSON text.
  const err = new ApiException(403, 'Unknown API Status Code!', JSON.stringify(forbidden('list')), { 'content-type': 'application/json' });
  t.is(describeError(err), `${forbidden('list').message}, HTTP 403`);
  t.is(describeError(new ApiException(500, 'Unknown API Status Code!', 'not JSON', {})), 'HTTP-Code: 500, HTTP 500', 'a body that is no Status: the library\'s first line');
});

test.serial('a watch the API server refuses (403) is reported naming the verb and resource, and retried after the backoff', async (t) => {
  const server = await scripted(listOf(10, 'web'), refuse('watch'));
  const { log } = await startedFor(t, server);
  await until('two errors', async () => log.filter((l) => l.startsWith('error ')).length >= 2, 10_000);
  t.is(log[0], 'replace web', 'what was listed is handed over');
  t.is(
    log[1],
    'error watch of Services: forbidden: the credentials cannot watch resource "services" in API group "" at the cluster scope (drover needs list and watch on services, endpointslices.discovery.k8s.io and nodes: deploy/kubernetes/drover.yaml)',
  );
});
