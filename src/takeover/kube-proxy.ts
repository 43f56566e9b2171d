/**
 * `drover takeover` refuses while kube-proxy still runs in the namespace:
 * two proxies would program the node against each other, and kube-proxy
 * would put back what the takeover removes. Two signs, either enough: a
 * process named kube-proxy whose network namespace (/proc/PID/ns/net) is
 * the one taken over, or kube-proxy's healthz port (10256, its
 * `--healthz-bind-address` default, pkg/proxy/apis/config/v1alpha1)
 * accepting a connection on 127.0.0.1 inside that namespace.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { runCommand } from '../kernel/exec.ts';

/** kube-proxy's default healthz port. */
export const KUBE_PROXY_HEALTHZ_PORT = 10256;

/** The namespace file of `netns` (ip netns's /run/netns/NAME), or this process's own. */
function namespaceFile(netns: string | undefined): string {
  return netns !== undefined ? `/run/netns/${netns}` : '/proc/self/ns/net';
}

/** PIDs of processes named kube-proxy (/proc/PID/comm) in the network namespace of `netns`. */
export async function kubeProxyProcesses(netns?: string): Promise<number[]> {
  const target = await stat(namespaceFile(netns));
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      if ((await readFile(`/proc/${entry}/comm`, 'utf8')).trim() !== 'kube-proxy') continue;
      const ns = await stat(`/proc/${entry}/ns/net`);
      if (ns.dev === target.dev && ns.ino === target.ino) found.push(Number(entry));
    } catch {
      // The process ended while being read.
    }
  }
  return found;
}

/**
 * True when something accepts a TCP connection on 127.0.0.1:`port` inside
 * `netns` (bash's /dev/tcp). A connection to 127.0.0.1 is accepted or
 * refused at once; the 15 s bound is for starting `ip netns exec` and bash
 * on a busy node, where 2 s were not always enough and a listener went
 * unseen.
 */
export async function portAnswers(port: number, netns?: string): Promise<boolean> {
  const res = await runCommand('bash', ['-c', `exec 3<>/dev/tcp/127.0.0.1/${port}`], { ...(netns !== undefined ? { netns } : {}), timeoutMs: 15_000 });
  return res.code === 0;
}

/**
 * Why kube-proxy looks alive in the namespace of `netns`, in one line, or
 * undefined when it does not.
 */
export async function kubeProxyAlive(netns?: string): Promise<string | undefined> {
  const pids = await kubeProxyProcesses(netns);
  if (pids.length > 0) return `kube-proxy is running in this network namespace (PID ${pids.join(', ')}); stop it first`;
  if (await portAnswers(KUBE_PROXY_HEALTHZ_PORT, netns)) return `something answers on kube-proxy's healthz port 127.0.0.1:${KUBE_PROXY_HEALTHZ_PORT} in this network namespace; stop kube-proxy first`;
  return undefined;
}
