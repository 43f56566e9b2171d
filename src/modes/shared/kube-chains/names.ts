/**
 * KUBE-SVC / KUBE-SEP chain names, computed exactly as kube-proxy does
 * (pkg/proxy/iptables/proxier.go: portProtoHash, servicePortChainName,
 * servicePortEndpointChainName), so that chain names are the same on a node
 * whichever of the two programs wrote them.
 */
import { createHash } from 'node:crypto';

const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/**
 * RFC 4648 base32 (standard alphabet, with padding), as Go's
 * `base32.StdEncoding.EncodeToString`.
 */
export function base32(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32_ALPHABET[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32_ALPHABET[(buffer << (5 - bits)) & 31];
  while (out.length % 8 !== 0) out += '=';
  return out;
}

/** First 16 characters of base32(sha256(text)): kube-proxy's chain-name suffix. */
export function hashSuffix(text: string): string {
  return base32(createHash('sha256').update(text).digest()).slice(0, 16);
}

/**
 * KUBE-SVC chain of a service port.
 * @param servicePortName "namespace/name:port" (kube-proxy's ServicePortName.String())
 * @param protocol lower-case protocol, e.g. "tcp"
 */
export function serviceChainName(servicePortName: string, protocol: string): string {
  return `KUBE-SVC-${hashSuffix(servicePortName + protocol)}`;
}

/**
 * KUBE-SVL chain of a service port: its local endpoints, for
 * internalTrafficPolicy Local (kube-proxy's servicePortPolicyLocalChainName).
 * @param servicePortName "namespace/name:port"
 * @param protocol lower-case protocol, e.g. "tcp"
 */
export function localServiceChainName(servicePortName: string, protocol: string): string {
  return `KUBE-SVL-${hashSuffix(servicePortName + protocol)}`;
}

/**
 * KUBE-EXT chain of a service port: where its external frontends (NodePort,
 * external IPs, LoadBalancer IPs) lead, with the masquerade and
 * externalTrafficPolicy Local short-circuit rules (kube-proxy's
 * serviceExternalChainName).
 */
export function externalChainName(servicePortName: string, protocol: string): string {
  return `KUBE-EXT-${hashSuffix(servicePortName + protocol)}`;
}

/**
 * KUBE-FW chain of a service port: the `loadBalancerSourceRanges` check of
 * its LoadBalancer IPs (kube-proxy's serviceFirewallChainName).
 */
export function firewallChainName(servicePortName: string, protocol: string): string {
  return `KUBE-FW-${hashSuffix(servicePortName + protocol)}`;
}

/**
 * KUBE-SEP chain of one endpoint of a service port.
 * @param endpoint "ip:port"
 */
export function endpointChainName(servicePortName: string, protocol: string, endpoint: string): string {
  return `KUBE-SEP-${hashSuffix(servicePortName + protocol + endpoint)}`;
}

/** True for the per-service chains drover creates and deletes (KUBE-SVC-*, KUBE-SVL-*, KUBE-EXT-*, KUBE-FW-*, KUBE-SEP-*). */
export function isServiceChain(chain: string): boolean {
  return /^KUBE-(SVC|SVL|EXT|FW|SEP)-[A-Z2-7]{16}$/.test(chain);
}

/**
 * The service port a kube-proxy-style comment names: its first word when that
 * word is "namespace/name[:port]" ("default/web:http cluster IP",
 * "default/web:http -> 10.244.1.2:8080", "default/web:http"); undefined for
 * other comments ("kubernetes service portals").
 */
export function commentServicePort(comment: string): string | undefined {
  const first = comment.split(' ')[0]!;
  return /^[^/\s]+\/[^/\s]+$/.test(first) ? first : undefined;
}
