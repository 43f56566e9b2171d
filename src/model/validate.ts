/**
 * Strict validators for every string and number that comes from a manifest
 * and may end up in iptables-restore input or a log line: addresses, ports,
 * names, protocols, CIDRs.
 *
 * Convention: a `checkX(value)` function returns `undefined` when the value is
 * valid and otherwise a one-line problem description that shows the value
 * (strings JSON-quoted, so spaces, quotes and newlines are visible), e.g.
 * `70000 is out of range 1-65535`. Nothing here throws except
 * {@link parseCIDR}, which documents it.
 *
 * Addresses and CIDRs are read by addr.ts. IPv4 addresses are strict
 * canonical dotted quads everywhere except endpoint addresses, which are
 * read as kube-proxy reads them: leading zeros are accepted and read as
 * decimal ({@link parseEndpointIPv4}).
 *
 * The name rules are those of k8s.io/apimachinery/pkg/util/validation
 * (IsDNS1123Label, IsDNS1123Subdomain, IsValidLabelValue, IsValidPortName).
 */
import { canonicalIPv4Value, isCanonicalIPv4, isIPv6, parseCIDR as readCIDR, parseIPSloppy } from './addr.ts';
import { quote } from './quote.ts';
import type { IPFamily, Protocol } from './types.ts';

/** A validator: `undefined` when valid, else a one-line problem description. */
export type Check<T> = (value: T) => string | undefined;

/** Render a value for a problem description: strings quoted (quote.ts, cut to 80 characters), numbers as they are. */
function show(value: unknown): string {
  if (typeof value === 'number') return String(value);
  return quote(String(value));
}

// ---------------------------------------------------------------- IPv4

/** Check a canonical dotted-quad IPv4 address (addr.ts `isCanonicalIPv4`). */
export const checkIPv4: Check<string> = (value) =>
  isCanonicalIPv4(value) ? undefined : `${show(value)} is not a valid IPv4 address (dotted quad, no leading zeros)`;

/**
 * Check an IPv4 address usable as a ClusterIP or an endpoint: a valid dotted
 * quad that is not "this network" (0.0.0.0/8), loopback (127.0.0.0/8),
 * link-local (169.254.0.0/16), multicast (224.0.0.0/4) or the broadcast
 * address. DNAT to such addresses is meaningless or dangerous (e.g.
 * exposing a node's localhost services); the Kubernetes API rejects them
 * for endpoints too (pkg/apis/core/validation ValidateEndpointIP).
 */
export const checkUnicastIPv4: Check<string> = (value) => {
  const n = canonicalIPv4Value(value);
  if (n === undefined) return checkIPv4(value);
  const special = specialAddress(n);
  return special ? `${show(value)} is ${special}` : undefined;
};

/**
 * Why the uint32 address `n` fails {@link checkUnicastIPv4} ("a loopback
 * address", ...), or undefined when it is usable as a ClusterIP or endpoint.
 */
export function specialAddress(n: number): string | undefined {
  return n >>> 24 === 0 ? 'in 0.0.0.0/8'
    : n >>> 24 === 127 ? 'a loopback address'
    : n >>> 16 === 0xa9fe ? 'a link-local address'
    : n >>> 28 === 0xe ? 'a multicast address'
    : n === 0xffffffff ? 'the broadcast address'
    : undefined;
}

/** An IPv4 network: `network` is the uint32 of its first address, `prefix` 0-32, `size` = 2^(32-prefix) addresses. */
export interface CIDR {
  readonly network: number;
  readonly prefix: number;
  readonly size: number;
}

/**
 * Parse "a.b.c.d/len" (e.g. "10.96.0.0/12") into a {@link CIDR}. Strict
 * (addr.ts `parseCIDR`): the address must be a canonical dotted quad with no
 * host bits set, the prefix a decimal 0-32 without leading zeros. Throws
 * Error with a clear message naming the input otherwise.
 */
export function parseCIDR(value: string): CIDR {
  const read = readCIDR(value);
  if (read === undefined || read.ip.family !== 4) {
    throw new Error(`${show(value)} is not a valid IPv4 CIDR (expected e.g. "10.96.0.0/12")`);
  }
  const { ip, prefix } = read;
  if (ip.value !== prefix.network) throw new Error(`${show(value)} has host bits set; did you mean "${prefix.text}"?`);
  return { network: Number(prefix.network), prefix: prefix.bits, size: 2 ** (32 - prefix.bits) };
}

// ---------------------------------------------------------------- either family

/**
 * Check an address a Service or Node can carry besides the IPv4 ClusterIP
 * (a ClusterIP of either family, an external IP, a LoadBalancer ingress IP,
 * a node address): a unicast IPv4 address ({@link checkUnicastIPv4}) or an
 * IPv6 address (node:net isIPv6, without a "%zone" suffix).
 */
export const checkServiceIP: Check<string> = (value) => {
  if (isCanonicalIPv4(value)) return checkUnicastIPv4(value);
  if (isIPv6(value) && !value.includes('%')) return undefined;
  return `${show(value)} is not a valid IPv4 or IPv6 address`;
};

/** The family of an address that passed {@link checkServiceIP}: IPv6 when it contains ':'. */
export function ipFamilyOf(ip: string): IPFamily {
  return ip.includes(':') ? 'IPv6' : 'IPv4';
}

/**
 * Check a client CIDR of `spec.loadBalancerSourceRanges`: a canonical IPv4
 * dotted quad with a prefix 0-32, or an IPv6 address with a prefix 0-128
 * (decimal, no leading zeros). Host bits are allowed, as the Kubernetes API
 * allows them (pkg/apis/core/validation, ParseCIDRSloppy).
 */
export const checkSourceRange: Check<string> = (value) => {
  const m = /^([^/]+)\/(0|[1-9][0-9]{0,2})$/.exec(value);
  const prefix = m ? Number(m[2]) : NaN;
  const ok = m !== null && ((isCanonicalIPv4(m[1]!) && prefix <= 32) || (isIPv6(m[1]!) && !m[1]!.includes('%') && prefix <= 128));
  return ok ? undefined : `${show(value)} is not a valid CIDR (expected e.g. "203.0.113.0/24" or "2001:db8::/32")`;
};

// ---------------------------------------------------------------- numbers

/** Check an integer in [min, max]; the message is "`v` is out of range min-max" or "`v` is not an integer". */
export function checkIntRange(value: number, min: number, max: number): string | undefined {
  if (!Number.isInteger(value)) return `${show(value)} is not an integer`;
  return value < min || value > max ? `${value} is out of range ${min}-${max}` : undefined;
}

/** Check a TCP/UDP/SCTP port number: integer 1-65535. */
export const checkPort: Check<number> = (value) => checkIntRange(value, 1, 65535);

// ---------------------------------------------------------------- names

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const IANA_SVC_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/**
 * Check a DNS-1123 label: lower-case alphanumerics and '-', starting and
 * ending alphanumeric, 1-63 characters. Used for namespaces, Service names,
 * port names and the kubernetes.io/service-name label.
 */
export const checkDNSLabel: Check<string> = (value) =>
  value.length <= 63 && DNS1123_LABEL.test(value)
    ? undefined
    : `${show(value)} is not a valid DNS-1123 label (lower-case alphanumerics and '-', alphanumeric at both ends, at most 63 characters)`;

/**
 * Check a DNS-1123 subdomain: dot-separated DNS-1123 labels, at most 253
 * characters. Used for EndpointSlice names and node names.
 */
export const checkDNSSubdomain: Check<string> = (value) =>
  value.length <= 253 && DNS1123_SUBDOMAIN.test(value) && value.split('.').every((l) => l.length <= 63)
    ? undefined
    : `${show(value)} is not a valid DNS-1123 subdomain (dot-separated DNS-1123 labels, at most 253 characters)`;

/** Check a node name (Kubernetes node names are DNS-1123 subdomains). */
export const checkNodeName: Check<string> = checkDNSSubdomain;

/**
 * Check a topology zone. Zones are label values (topology.kubernetes.io/zone):
 * alphanumerics, '-', '_' and '.', alphanumeric at both ends, at most 63
 * characters; the empty value is rejected since an absent zone is omitted.
 */
export const checkZone: Check<string> = (value) =>
  value !== '' && value.length <= 63 && LABEL_VALUE.test(value)
    ? undefined
    : `${show(value)} is not a valid zone (a label value: alphanumerics, '-', '_' and '.', at most 63 characters)`;

/**
 * Check a label value (IsValidLabelValue): empty, or alphanumerics, '-',
 * '_' and '.', alphanumeric at both ends, at most 63 characters. Used for
 * Pod labels and Service selectors.
 */
export const checkLabelValue: Check<string> = (value) =>
  value.length <= 63 && LABEL_VALUE.test(value)
    ? undefined
    : `${show(value)} is not a valid label value (alphanumerics, '-', '_' and '.', alphanumeric at both ends, at most 63 characters)`;

/**
 * Check a label key (IsQualifiedName): an optional DNS-1123 subdomain
 * prefix and '/', then a name of alphanumerics, '-', '_' and '.',
 * alphanumeric at both ends, 1-63 characters ("app",
 * "app.kubernetes.io/name").
 */
export const checkLabelKey: Check<string> = (value) => {
  const slash = value.indexOf('/');
  const prefix = slash < 0 ? undefined : value.slice(0, slash);
  const name = slash < 0 ? value : value.slice(slash + 1);
  const ok = name !== '' && name.length <= 63 && LABEL_VALUE.test(name) && (prefix === undefined || checkDNSSubdomain(prefix) === undefined);
  return ok ? undefined : `${show(value)} is not a valid label key (an optional DNS-1123 subdomain and '/', then 1-63 alphanumerics, '-', '_' and '.')`;
};

/**
 * Check a named container port as used by a Service's `targetPort`
 * (IANA_SVC_NAME, IsValidPortName): lower-case alphanumerics and '-', at most
 * 15 characters, at least one letter, no "--", alphanumeric at both ends.
 */
export const checkPortName: Check<string> = (value) =>
  value.length <= 15 && IANA_SVC_NAME.test(value) && /[a-z]/.test(value) && !value.includes('--')
    ? undefined
    : `${show(value)} is not a valid port name (IANA service name: lower-case alphanumerics and '-', at most 15 characters, at least one letter)`;

// ---------------------------------------------------------------- protocol

/** The protocols drover programs, as spelt by the Kubernetes API. */
export const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

/**
 * Upper-case ASCII letters only. Unicode upper-casing would turn look-alikes
 * into protocol names ("ſctp" → "SCTP", with U+017F LATIN SMALL LETTER LONG S).
 */
export function asciiUpperCase(value: string): string {
  return value.replace(/[a-z]+/g, (s) => s.toUpperCase());
}

/**
 * Check a protocol name. Kubernetes spells them exactly "TCP", "UDP",
 * "SCTP"; with `ignoreCase` (Shepherd, which writes "tcp") any ASCII case is
 * accepted (a non-ASCII letter never is) and the caller upper-cases the
 * value with {@link asciiUpperCase} after checking.
 */
export function checkProtocol(value: string, opts: { ignoreCase: boolean }): string | undefined {
  const v = opts.ignoreCase ? asciiUpperCase(value) : value;
  return (PROTOCOLS as readonly string[]).includes(v) ? undefined : `${show(value)} is not a supported protocol (TCP, UDP or SCTP)`;
}

// ---------------------------------------------------------------- endpoint addresses

/**
 * Outcome of {@link parseEndpointIPv4}: the canonical address, with `note`
 * (a one-line warning) when the input was not written canonically; or a
 * one-line problem when the input is no usable IPv4 address.
 */
export type EndpointIPv4 = { readonly ip: string; readonly note?: string } | { readonly problem: string };

/**
 * Read an endpoint address as kube-proxy does. kube-proxy parses endpoint
 * addresses with `ParseIPSloppy` (k8s.io/utils/net/parse.go, called in
 * pkg/proxy/endpointslicecache.go), which accepts leading zeros in an
 * octet and reads them as decimal. So:
 *
 *   - "10.180.0.1" → `{ ip: "10.180.0.1" }`;
 *   - "10.180.0.01" → `{ ip: "10.180.0.1", note: '"10.180.0.01" has leading
 *     zeros; read as 10.180.0.1, as kube-proxy does' }`;
 *   - anything else → `{ problem }`: not a dotted quad or an octet above 255
 *     ("10.180.0.999", "abc", "10.0.0.1 -j ACCEPT"), an IPv6 address, or an
 *     address that is not unicast (see {@link checkUnicastIPv4}), e.g.
 *     '"127.0.0.1" is a loopback address'.
 *
 * The address is read with addr.ts `parseIPSloppy`. Never throws.
 */
export function parseEndpointIPv4(value: string): EndpointIPv4 {
  // The common case, a canonical dotted quad, without reading it more than once.
  const n = canonicalIPv4Value(value);
  if (n !== undefined) {
    const special = specialAddress(n);
    return special === undefined ? { ip: value } : { problem: `${show(value)} is ${special}` };
  }
  const addr = parseIPSloppy(value);
  if (addr?.family !== 4) {
    return { problem: isIPv6(value) ? `${show(value)} is an IPv6 address, not an IPv4 one` : `${show(value)} is not a valid IPv4 address` };
  }
  const ip = addr.text;
  const special = specialAddress(Number(addr.value));
  if (special !== undefined) return { problem: ip === value ? `${show(value)} is ${special}` : `${show(value)} reads as ${ip}, ${special}` };
  return ip === value ? { ip } : { ip, note: `${show(value)} has leading zeros; read as ${ip}, as kube-proxy does` };
}

/**
 * Why the IPv6 address `value` (canonical text, addr.ts) is no usable
 * endpoint, or undefined when it is: the Kubernetes API rejects the
 * unspecified, loopback, link-local and multicast addresses for endpoints
 * (pkg/apis/core/validation ValidateEndpointIP, ValidateNonSpecialIP); an
 * IPv4-mapped address is an IPv4 endpoint written in an IPv6 form.
 */
function specialIPv6(value: bigint): string | undefined {
  return value === 0n ? 'the unspecified address'
    : value === 1n ? 'a loopback address'
    : value >> 118n === 0x3fan ? 'a link-local address'
    : value >> 120n === 0xffn ? 'a multicast address'
    : value >> 32n === 0xffffn ? 'an IPv4-mapped address'
    : undefined;
}

/**
 * {@link parseEndpointIPv4} for an address that must be of `family`: IPv4
 * as that function reads it; IPv6 read by addr.ts `parseIP` and given in
 * its canonical form (RFC 5952), with a `note` when it was written
 * otherwise ("FD00::01" → "fd00::1"). An address of the other family is a
 * problem that names both families, so that a caller can skip it and keep
 * the rest (kube-proxy's per-family proxiers never see it). Never throws.
 */
export function parseEndpointIP(value: string, family: IPFamily): EndpointIPv4 {
  if (family === 'IPv4') return parseEndpointIPv4(value);
  const addr = value.includes('%') ? undefined : parseIPSloppy(value);
  if (addr === undefined) return { problem: `${show(value)} is not a valid IPv6 address` };
  if (addr.family === 4) return { problem: `${show(value)} is an IPv4 address, not an IPv6 one` };
  const special = specialIPv6(addr.value);
  if (special !== undefined) return { problem: `${show(value)} is ${special}` };
  return addr.text === value ? { ip: value } : { ip: addr.text, note: `${show(value)} is not in canonical form; read as ${addr.text}` };
}

// ---------------------------------------------------------------- ip:port

/** {@link checkUnicastIPv4} in the shape of {@link parseEndpointIPv4} (never a note). */
function readUnicastIPv4(value: string): EndpointIPv4 {
  const problem = checkUnicastIPv4(value);
  return problem === undefined ? { ip: value } : { problem };
}

/**
 * Split an "ip:port" endpoint string (Shepherd's `status.endpoints`), e.g.
 * "10.20.0.2:8080". Returns the parts, or a problem description when the
 * string is not exactly a unicast IPv4 address, ':' and a port 1-65535.
 *
 * With `endpoint`, the address is read as an endpoint address
 * ({@link parseEndpointIPv4}: leading zeros are read as decimal and
 * reported in `note`, prefixed with the whole string); without it, only a
 * canonical dotted quad is accepted.
 */
export function parseIPv4HostPort(
  value: string,
  opts: { endpoint?: boolean } = {},
): { ip: string; port: number; note?: string } | { problem: string } {
  const m = /^([0-9.]+):([1-9][0-9]{0,4})$/.exec(value);
  if (!m) {
    // "[fd00::1]:8080" (Go's net.JoinHostPort) or a bare IPv6 text: say so, rather than "not ip:port".
    const bracketed = /^\[([^\]]*)\]:[0-9]+$/.exec(value)?.[1];
    if ((bracketed !== undefined && isIPv6(bracketed)) || isIPv6(value)) return { problem: `${show(value)} is an IPv6 endpoint; only IPv4 "ip:port" endpoints are read` };
    return { problem: `${show(value)} is not an "ip:port" endpoint` };
  }
  const port = Number(m[2]);
  const addr = (opts.endpoint ? parseEndpointIPv4 : readUnicastIPv4)(m[1]!);
  if ('problem' in addr) return { problem: `${show(value)}: ${addr.problem}` };
  const portProblem = checkPort(port);
  if (portProblem !== undefined) return { problem: `${show(value)}: ${portProblem}` };
  return addr.note === undefined ? { ip: addr.ip, port } : { ip: addr.ip, port, note: `${show(value)}: ${addr.note}` };
}
