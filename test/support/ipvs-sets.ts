/** The `ipset restore` lines that create IPVS mode's sets other than KUBE-CLUSTER-IP and KUBE-LOOP-BACK, in the order drover writes them (KUBE-IPVS-IPS then gets one entry per kube-ipvs0 address). */
const OTHER_SETS: readonly string[] = [
  'create KUBE-EXTERNAL-IP hash:ip,port family inet hashsize 1024 maxelem 65536',
  'create KUBE-EXTERNAL-IP-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536',
  'create KUBE-LOAD-BALANCER hash:ip,port family inet hashsize 1024 maxelem 65536',
  'create KUBE-LOAD-BALANCER-FW hash:ip,port family inet hashsize 1024 maxelem 65536',
  'create KUBE-LOAD-BALANCER-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536',
  'create KUBE-LOAD-BALANCER-SOURCE-IP hash:ip,port,ip family inet hashsize 1024 maxelem 65536',
  'create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536',
  'create KUBE-NODE-PORT-TCP bitmap:port range 0-65535',
  'create KUBE-NODE-PORT-LOCAL-TCP bitmap:port range 0-65535',
  'create KUBE-NODE-PORT-UDP bitmap:port range 0-65535',
  'create KUBE-NODE-PORT-LOCAL-UDP bitmap:port range 0-65535',
  'create KUBE-NODE-PORT-SCTP hash:ip,port family inet hashsize 1024 maxelem 65536',
  'create KUBE-NODE-PORT-LOCAL-SCTP hash:ip,port family inet hashsize 1024 maxelem 65536',
  'create KUBE-HEALTH-CHECK-NODE-PORT bitmap:port range 0-65535',
  'create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536',
  'create KUBE-EXTERNAL-NO-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536',
  'create KUBE-INTERNAL-NO-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536',
];

/** The lines of {@link OTHER_SETS} with `add KUBE-IPVS-IPS` lines for `ipvsIps` (in the order given) after that set's create. */
export function otherSets(ipvsIps: readonly string[] = []): string[] {
  return OTHER_SETS.flatMap((l) => (l.startsWith('create KUBE-IPVS-IPS ') ? [l, ...ipvsIps.map((ip) => `add KUBE-IPVS-IPS ${ip}`)] : [l]));
}

/** {@link otherSets} without any kube-ipvs0 address. */
export const EMPTY_FRONTEND_SETS: readonly string[] = otherSets();
