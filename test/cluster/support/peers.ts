/**
 * The real peers for the cluster tests: where scripts/peers/build.sh put
 * them, and whether the tests can run.
 *
 * The tests run when the peers are built; else they skip with one line
 * saying how to build them. With DROVER_PEERS_REQUIRED=1 (as .ci/run sets)
 * a missing build is a failure instead, so that CI cannot pass by skipping.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testbedUnavailableReason } from '../../../src/testbed/topology.ts';

/** The repository's root. */
export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

/** Each cluster test's and hook's own limit, ms (`t.timeout`): AVA's inactivity timeout is shorter than an API server's start on a busy machine. */
export const TIMEOUT_MS = 10 * 60_000;

/** Paths of the built peers. */
export interface Peers {
  /** The build directory, /var/cache/drover-peers/<key> by default. */
  readonly dir: string;
  /** test/peers/cmd/test-apiserver: embedded etcd + kube-apiserver. */
  readonly testApiserver: string;
  /** test/peers/cmd/kube-proxy: the real kube-proxy. */
  readonly kubeProxy: string;
}

/** The peers when scripts/peers/build.sh has built them for the current sources (`--locate`), else undefined. Builds nothing. */
export function locatePeers(): Peers | undefined {
  const r = spawnSync('bash', [join(ROOT, 'scripts/peers/build.sh'), '--locate'], { encoding: 'utf8' });
  const dir = r.status === 0 ? r.stdout.trim() : '';
  if (dir === '') return undefined;
  return { dir, testApiserver: join(dir, 'test-apiserver'), kubeProxy: join(dir, 'kube-proxy') };
}

/**
 * Why the cluster tests cannot run here (not root, no network namespaces,
 * the peers not built), or undefined with the peers when they can.
 * @throws Error when DROVER_PEERS_REQUIRED=1 and they cannot run.
 */
export async function clusterTestsGate(): Promise<{ peers: Peers; reason?: undefined } | { peers?: undefined; reason: string }> {
  const testbed = await testbedUnavailableReason();
  const peers = testbed === undefined ? locatePeers() : undefined;
  const reason = testbed ?? (peers === undefined ? 'the real peers are not built (run scripts/peers/build.sh)' : undefined);
  if (reason === undefined && peers !== undefined) return { peers };
  const why = reason ?? 'unknown';
  if (process.env.DROVER_PEERS_REQUIRED === '1') throw new Error(`DROVER_PEERS_REQUIRED=1 but the cluster tests cannot run: ${why}`);
  return { reason: why };
}
