/**
 * Where the Kubernetes source finds its API server and credentials, as
 * kube-proxy does (cmd/kube-proxy/app/server.go createClient): an explicit
 * `--kubeconfig` file first; else, when drover runs in a pod, the in-cluster
 * configuration (the KUBERNETES_SERVICE_HOST/PORT variables and the service
 * account token and CA under /var/run/secrets/kubernetes.io/serviceaccount);
 * else the file named by `$KUBECONFIG` (the first of a colon-separated list);
 * else `~/.kube/config`.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { DroverError } from '../../errors.ts';

/** The service account token of a pod: its presence (with KUBERNETES_SERVICE_HOST) means "in a cluster". */
export const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/** Inputs of {@link loadKubeConfig} (the environment is the process's); the home folder and the file check are parameters for tests. */
export interface KubeConfigInput {
  /** `--kubeconfig`, when given. */
  readonly kubeconfig?: string | undefined;
  readonly home?: string;
  readonly exists?: (path: string) => boolean;
}

/** A loaded configuration, and where it came from ("in-cluster" or a file path), for messages. */
export interface LoadedKubeConfig {
  readonly config: KubeConfig;
  readonly from: string;
  /** The API server's URL of the current context. */
  readonly server: string;
}

/**
 * Load the configuration (see the module comment).
 * @throws DroverError naming the file when it is missing or unreadable, or
 *   when it has no current cluster.
 */
export function loadKubeConfig(input: KubeConfigInput = {}): LoadedKubeConfig {
  const env = process.env;
  const exists = input.exists ?? existsSync;
  const config = new KubeConfig();
  let from: string;
  if (input.kubeconfig !== undefined) {
    from = readFile(config, input.kubeconfig, '--kubeconfig', exists);
  } else if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT && exists(SERVICE_ACCOUNT_TOKEN)) {
    config.loadFromCluster();
    from = 'in-cluster';
  } else if (env.KUBECONFIG) {
    const first = env.KUBECONFIG.split(delimiter).find((p) => p !== '');
    if (first === undefined) throw new DroverError('$KUBECONFIG is set but names no file');
    from = readFile(config, first, '$KUBECONFIG', exists);
  } else {
    from = readFile(config, join(input.home ?? homedir(), '.kube', 'config'), 'the default kubeconfig', exists);
  }
  const cluster = config.getCurrentCluster();
  if (!cluster) throw new DroverError(`kubeconfig ${from}: no cluster for the current context ${JSON.stringify(config.getCurrentContext() ?? '')}`);
  return { config, from, server: cluster.server };
}

/** Load `path` into `config`; returns `path`. */
function readFile(config: KubeConfig, path: string, what: string, exists: (path: string) => boolean): string {
  if (!exists(path)) {
    throw new DroverError(`kubeconfig ${path} (${what}) not found; give --kubeconfig, set $KUBECONFIG, or run drover in a pod`);
  }
  try {
    config.loadFromFile(path);
  } catch (err) {
    throw new DroverError(`kubeconfig ${path} (${what}): ${(err as Error).message}`, { cause: err });
  }
  return path;
}
