/** The Kubernetes source as the command line asks for it: `--source kubernetes` with its flags. */
import { hostname } from 'node:os';
import type { DnsCliOptions } from '../../config/dns.ts';
import type { RenderCliOptions } from '../../config/render-cli.ts';
import { ANY_NODE_PORT } from '../../model/claims.ts';
import type { Logger } from '../../util/log.ts';
import { loadKubeConfig } from './config.ts';
import { KubernetesSource } from './source.ts';

/**
 * A {@link KubernetesSource} for the flags: the kubeconfig of config.ts,
 * the node `--hostname-override` names (default: this host's name,
 * trimmed and lower-cased as kube-proxy does), and `--list-timeout` for the
 * one-shot commands (absent: wait as long as it takes, as `drover run`).
 * With `--dns-address` it receives the EndpointSlices of headless Services
 * too, for their names (source.ts DNS_SLICE_SELECTOR).
 * NodePorts are checked against `--service-node-port-range` only when it is
 * given: the API server has already held every Service to its own range,
 * which a cluster may have widened (k3s, minikube and others do).
 * Connects to nothing until the first load or watch.
 * @throws DroverError when the kubeconfig cannot be read; Error on a bad service CIDR.
 */
export function createKubernetesSource(opts: RenderCliOptions & Pick<DnsCliOptions, 'dnsAddress'>, logger: Logger): KubernetesSource {
  const { config, server } = loadKubeConfig({ kubeconfig: opts.kubeconfig, master: opts.master });
  return new KubernetesSource({
    config,
    server,
    nodeName: opts.hostnameOverride ?? hostname().trim().toLowerCase(),
    serviceCIDR: opts.serviceCidr,
    nodePortRange: opts.serviceNodePortRange ?? ANY_NODE_PORT,
    logger,
    listTimeoutMs: opts.listTimeout,
    headlessEndpoints: opts.dnsAddress !== undefined,
  });
}
