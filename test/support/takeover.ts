/**
 * What `drover takeover --mode nftables` prints, survey and plan, on a node
 * that holds iptables mode's state of one Service with a ClusterIP and a
 * NodePort (iptables-nft, IPv4 only): the text the unit tests build from a
 * fake survey and the kernel test reads from a real one.
 */
export const IPTABLES_TO_NFTABLES_PLAN =
  'found:\n' +
  '  iptables mode: iptables-nft IPv4: 13 chains, 15 hook rules\n' +
  '  IPVS mode: nothing\n' +
  "    not read: IPVS virtual servers: not read with --netns (netlink reads drover's own network namespace)\n" +
  '  nftables mode: nothing\n' +
  '  kube-proxy nftables mode: nothing\n' +
  'plan:\n' +
  '  1. full sync in nftables mode, from nothing\n' +
  '  2. check every frontend: iptables mode must send it to the same endpoints as nftables mode\n' +
  '  3. remove iptables mode\n';
