/** The `ipset restore` lines that create IPVS mode's frontend sets, in the order drover writes them: what a payload holds when no service port has a NodePort, external IP or LoadBalancer IP. */
export const EMPTY_FRONTEND_SETS: readonly string[] = [
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
  'create KUBE-EXTERNAL-NO-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536',
];
