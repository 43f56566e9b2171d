/**
 * Where the Kubernetes source finds its API server and credentials, as
 * kube-proxy does (cmd/kube-proxy/app/server.go createClient): an explicit
 * `--kubeconfig` file first (its server replaced by `--master` when given);
 * else `--master` alone; else, when drover runs in a pod, the in-cluster
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
  /**
   * `--master`, when given: the API server's URL, replacing the current
   * cluster's server (kube-proxy's clientcmd.BuildConfigFromFlags); with no
   * `--kubeconfig`, that server alone, with no credentials.
   */
  readonly master?: string | undefined;
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
  } else if (input.master !== undefined) {
    config.loadFromClusterAndUser({ name: 'master', server: input.master, skipTLSVerify: false }, { name: 'master' });
    from = '--master';
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
  const current = config.getCurrentCluster();
  if (!current) throw new DroverError(`kubeconfig ${from}: no cluster for the current context ${JSON.stringify(config.getCurrentContext() ?? '')}`);
  if (input.master !== undefined && current.server !== input.master) {
    const context = config.getContextObject(config.getCurrentContext());
    config.loadFromOptions({
      clusters: config.clusters.map((c) => (c.name === current.name ? { ...c, server: input.master! } : c)),
      users: config.users,
      contexts: config.contexts,
      currentContext: context?.name ?? config.getCurrentContext(),
    });
  }
  const cluster = config.getCurrentCluster()!;
  return { config, from: input.master !== undefined && from !== '--master' ? `${from} (server from --master)` : from, server: cluster.server };
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
