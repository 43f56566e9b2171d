/**
 * The UAPI numbers the nf_tables netlink codec uses. Values are kernel ABI
 * (never renumbered); each block names the header it is copied from:
 * - include/uapi/linux/netlink.h (nlmsghdr flags, control messages),
 * - include/uapi/linux/netfilter/nfnetlink.h (subsystems, batch messages),
 * - include/uapi/linux/netfilter/nf_tables.h (nf_tables messages, attributes),
 * - include/uapi/linux/netfilter.h (NFPROTO_* families).
 */

/** Netlink protocol of nfnetlink (NETLINK_NETFILTER, <linux/netlink.h>). */
export const NETLINK_NETFILTER = 12;

/** struct nlmsghdr length: len u32, type u16, flags u16, seq u32, pid u32 (<linux/netlink.h>). */
export const NLMSG_HDRLEN = 16;
/** struct nfgenmsg length: nfgen_family u8, version u8, res_id __be16 (<linux/netfilter/nfnetlink.h>). */
export const NFGENMSG_LEN = 4;

/** nlmsg_flags (<linux/netlink.h>). */
export const NLM_F = {
  REQUEST: 0x01,
  MULTI: 0x02,
  ACK: 0x04,
  ECHO: 0x08,
  /** Dump was inconsistent because the data changed during it. */
  DUMP_INTR: 0x10,
  /** GET: NLM_F_ROOT | NLM_F_MATCH. */
  DUMP: 0x300,
  /** NEW: override existing. */
  REPLACE: 0x100,
  /** NEW: do not touch, if it exists. */
  EXCL: 0x200,
  /** NEW: create, if it does not exist. */
  CREATE: 0x400,
  /** NEW: add to the end of the list (a rule at the end of its chain). */
  APPEND: 0x800,
  /** ACK: the request's payload was not copied into the error message. */
  CAPPED: 0x100,
  /** ACK: extended ack TLVs follow. */
  ACK_TLVS: 0x200,
} as const;

/** Control message types (<linux/netlink.h>). */
export const NLMSG_NOOP = 0x1;
/** An ACK (error 0) or an error (negative errno), followed by the request's header. */
export const NLMSG_ERROR = 0x2;
/** End of a multipart (dump) reply; payload an int error code. */
export const NLMSG_DONE = 0x3;

/** nfnetlink version in every nfgenmsg (NFNETLINK_V0, <linux/netfilter/nfnetlink.h>). */
export const NFNETLINK_V0 = 0;
/** Subsystem id of nf_tables (NFNL_SUBSYS_NFTABLES, <linux/netfilter/nfnetlink.h>). */
export const NFNL_SUBSYS_NFTABLES = 10;
/**
 * Multicast group of nf_tables change notifications (NFNLGRP_NFTABLES,
 * enum nfnetlink_groups in <linux/netfilter/nfnetlink.h>): every committed
 * batch announces each object it changed, then one NFT_MSG_NEWGEN.
 */
export const NFNLGRP_NFTABLES = 7;
/** Batch delimiters (NFNL_MSG_BATCH_BEGIN / _END = NLMSG_MIN_TYPE, +1; <linux/netfilter/nfnetlink.h>). */
export const NFNL_MSG_BATCH_BEGIN = 0x10;
export const NFNL_MSG_BATCH_END = 0x11;

/** enum nf_tables_msg_types (<linux/netfilter/nf_tables.h>); nlmsg_type is (NFNL_SUBSYS_NFTABLES << 8) | this. */
export const NFT_MSG = {
  NEWTABLE: 0,
  GETTABLE: 1,
  DELTABLE: 2,
  NEWCHAIN: 3,
  GETCHAIN: 4,
  DELCHAIN: 5,
  NEWRULE: 6,
  GETRULE: 7,
  DELRULE: 8,
  NEWSET: 9,
  GETSET: 10,
  DELSET: 11,
  NEWSETELEM: 12,
  GETSETELEM: 13,
  DELSETELEM: 14,
  NEWGEN: 15,
  GETGEN: 16,
  /** A trace event (enum nft_trace_attributes), sent to NFNLGRP_NFTRACE. */
  TRACE: 17,
} as const;

/** enum nft_set_elem_list_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_SET_ELEM_LIST = {
  TABLE: 1,
  SET: 2,
  /** Nested: NFTA_LIST_ELEM entries. */
  ELEMENTS: 3,
  /** Id of a set created earlier in the same batch (used only when the name is not found). */
  SET_ID: 4,
} as const;

/** enum nft_list_attributes (<linux/netfilter/nf_tables.h>): one entry of a nested list. */
export const NFTA_LIST_ELEM = 1;

/** enum nft_set_elem_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_SET_ELEM = {
  /** Nested: NFTA_DATA_VALUE. */
  KEY: 1,
  /** Nested: NFTA_DATA_VALUE or NFTA_DATA_VERDICT (maps). */
  DATA: 2,
  /** __be32, NFT_SET_ELEM_* flags. */
  FLAGS: 3,
  /** __be64 milliseconds. */
  TIMEOUT: 4,
  /** __be64 milliseconds left (dumps only). */
  EXPIRATION: 5,
  USERDATA: 6,
  EXPR: 7,
  PAD: 8,
  OBJREF: 9,
  /** Nested: NFTA_DATA_VALUE, the last key of a range (inclusive), in a concatenated interval set. */
  KEY_END: 10,
  EXPRESSIONS: 11,
} as const;

/** enum nft_data_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_DATA = { VALUE: 1, VERDICT: 2 } as const;

/** Largest NFTA_DATA_VALUE, bytes (NFT_DATA_VALUE_MAXLEN = 64, <linux/netfilter/nf_tables.h>). */
export const NFT_DATA_VALUE_MAXLEN = 64;

/** Largest table or set name, bytes without the NUL (NFT_NAME_MAXLEN 256 with it, <linux/netfilter/nf_tables.h>). */
export const NFT_NAME_MAX = 255;

/** enum nft_gen_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_GEN = {
  /** __be32 ruleset generation id. */
  ID: 1,
  /** __be32 pid of the last process to commit. */
  PROC_PID: 2,
  /** string: its name. */
  PROC_NAME: 3,
} as const;

/** Families (enum NFPROTO_*, <linux/netfilter.h>) of the nf_tables table families drover uses. */
export const NFPROTO = { UNSPEC: 0, IPV4: 2, IPV6: 10 } as const;

/** The nfnetlink multicast group of nf_tables trace events (NFNLGRP_NFTRACE, enum nfnetlink_groups, <linux/netfilter/nfnetlink.h>). */
export const NFNLGRP_NFTRACE = 9;

/** enum nft_trace_attributes (<linux/netfilter/nf_tables.h>): the attributes of an NFT_MSG_TRACE event. */
export const NFTA_TRACE = {
  /** string */
  TABLE: 1,
  /** string */
  CHAIN: 2,
  /** __be64 */
  RULE_HANDLE: 3,
  /** __be32, enum nft_trace_types */
  TYPE: 4,
  /** nested: NFTA_VERDICT_CODE, NFTA_VERDICT_CHAIN */
  VERDICT: 5,
  /** __be32: the same for every event of one packet */
  ID: 6,
  LL_HEADER: 7,
  /** binary: the IP header, as the packet was when the event was sent */
  NETWORK_HEADER: 8,
  /** binary: the start of the transport header */
  TRANSPORT_HEADER: 9,
  /** __be32 ifindex */
  IIF: 10,
  IIFTYPE: 11,
  /** __be32 ifindex */
  OIF: 12,
  OIFTYPE: 13,
  /** __be32 */
  MARK: 14,
  /** __be32, NFPROTO_* */
  NFPROTO: 15,
  /** __be32: the base chain's policy, for a POLICY event */
  POLICY: 16,
} as const;

/** enum nft_trace_types (<linux/netfilter/nf_tables.h>). */
export const NFT_TRACETYPE = { POLICY: 1, RETURN: 2, RULE: 3 } as const;

/** enum nft_verdict_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_VERDICT = { CODE: 1, CHAIN: 2 } as const;

/**
 * Verdict codes, as NFTA_VERDICT_CODE carries them (a __be32 read as a
 * signed int): the netfilter verdicts NF_DROP 0, NF_ACCEPT 1, NF_STOLEN 2,
 * NF_QUEUE 3, NF_REPEAT 4 (<linux/netfilter.h>) and nf_tables' own
 * (enum nft_verdicts, <linux/netfilter/nf_tables.h>).
 */
export const NFT_VERDICT_CODES: ReadonlyMap<number, string> = new Map([
  [0, 'drop'],
  [1, 'accept'],
  [2, 'stolen'],
  [3, 'queue'],
  [4, 'repeat'],
  [-1, 'continue'],
  [-2, 'break'],
  [-3, 'jump'],
  [-4, 'goto'],
  [-5, 'return'],
]);

/** enum nft_rule_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_RULE = {
  TABLE: 1,
  CHAIN: 2,
  /** __be64: the rule a NEWRULE with NLM_F_REPLACE replaces, in place. */
  HANDLE: 3,
  /** Nested: NFTA_LIST_ELEM entries, each an expression (NFTA_EXPR). */
  EXPRESSIONS: 4,
  /** Binary, at most NFT_USERDATA_MAXLEN (256): TLVs of libnftnl (udata.h), NFTNL_UDATA_RULE_COMMENT the comment. */
  USERDATA: 7,
} as const;

/** The TLV type of a rule's comment in its NFTA_RULE_USERDATA (libnftnl: enum nftnl_udata_rule_types NFTNL_UDATA_RULE_COMMENT). */
export const NFTNL_UDATA_RULE_COMMENT = 0;

/** enum nft_expr_attributes: an expression's name and its type-specific attributes (nested). */
export const NFTA_EXPR = { NAME: 1, DATA: 2 } as const;

/** enum nft_registers: the four 16-byte registers and the sixteen 4-byte registers that overlay them (NFT_REG32_00 = 8). */
export const NFT_REG = { R1: 1, R4: 4, R32_00: 8, R32_15: 23 } as const;

/** enum nft_ct_attributes / nft_ct_keys (the keys drover's rules load). */
export const NFTA_CT = { DREG: 1, KEY: 2, DIRECTION: 3 } as const;
export const NFT_CT = { STATE: 0, STATUS: 2, PROTO_DST: 12, DST_IP: 20, DST_IP6: 22 } as const;
/** enum ip_conntrack_dir: IP_CT_DIR_ORIGINAL. */
export const IP_CT_DIR_ORIGINAL = 0;

/** enum nft_meta_attributes / nft_meta_keys (the keys drover's rules load). */
export const NFTA_META = { DREG: 1, KEY: 2 } as const;
export const NFT_META = { L4PROTO: 16 } as const;

/** enum nft_payload_attributes / nft_payload_bases. */
export const NFTA_PAYLOAD = { DREG: 1, BASE: 2, OFFSET: 3, LEN: 4 } as const;
export const NFT_PAYLOAD = { NETWORK_HEADER: 1, TRANSPORT_HEADER: 2 } as const;

/** enum nft_bitwise_attributes (a boolean bitwise: dreg = (sreg & mask) ^ xor). */
export const NFTA_BITWISE = { SREG: 1, DREG: 2, LEN: 3, MASK: 4, XOR: 5 } as const;

/** enum nft_cmp_attributes / nft_cmp_ops. */
export const NFTA_CMP = { SREG: 1, OP: 2, DATA: 3 } as const;
export const NFT_CMP = { EQ: 0, NEQ: 1 } as const;

/** enum nft_lookup_attributes (DREG: where a map lookup writes the element's data). */
export const NFTA_LOOKUP = { SET: 1, SREG: 2, DREG: 3 } as const;

/** enum nft_ng_attributes / nft_ng_types: a number generator's register, modulus, type and offset; NFT_NG_RANDOM. */
export const NFTA_NG = { DREG: 1, MODULUS: 2, TYPE: 3, OFFSET: 4 } as const;
export const NFT_NG_RANDOM = 1;

/** enum nft_nat_attributes / nft_nat_types: NAT type, family, and the registers of the address and port range starts; NFT_NAT_DNAT. */
export const NFTA_NAT = { TYPE: 1, FAMILY: 2, REG_ADDR_MIN: 3, REG_ADDR_MAX: 4, REG_PROTO_MIN: 5, REG_PROTO_MAX: 6, FLAGS: 7 } as const;
export const NFT_NAT_DNAT = 1;

/** enum nft_dynset_attributes / nft_dynset_ops. */
export const NFTA_DYNSET = { SET_NAME: 1, OP: 3, SREG_KEY: 4, SREG_DATA: 5, TIMEOUT: 6 } as const;
export const NFT_DYNSET_OP_UPDATE = 1;

/** enum nft_table_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_TABLE = { NAME: 1, FLAGS: 2, USE: 3, HANDLE: 4 } as const;

/** enum nft_chain_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_CHAIN = {
  TABLE: 1,
  /** __be64 */
  HANDLE: 2,
  NAME: 3,
  /** Nested: NFTA_HOOK_* (base chains only). */
  HOOK: 4,
  /** __be32 NF_DROP (0) / NF_ACCEPT (1) (base chains only). */
  POLICY: 5,
  /** string: "filter", "nat", "route" (base chains only). */
  TYPE: 7,
  /** __be32 NFT_CHAIN_* flags. */
  FLAGS: 10,
} as const;

/** enum nft_hook_attributes (<linux/netfilter/nf_tables.h>): hook number (__be32) and priority (__be32, signed). */
export const NFTA_HOOK = { HOOKNUM: 1, PRIORITY: 2 } as const;

/** enum nf_inet_hooks (<linux/netfilter.h>): the hooks of the ip and ip6 families, by number, as nft(8) names them. */
export const NF_INET_HOOKS: readonly string[] = ['prerouting', 'input', 'forward', 'output', 'postrouting'];

/** Netfilter verdicts of a base chain's policy (<linux/netfilter.h>). */
export const NF_POLICIES: ReadonlyMap<number, string> = new Map([
  [0, 'drop'],
  [1, 'accept'],
]);

/** enum nft_set_attributes (<linux/netfilter/nf_tables.h>). */
export const NFTA_SET = {
  TABLE: 1,
  NAME: 2,
  /** __be32 NFT_SET_* flags. */
  FLAGS: 3,
  /** __be32: nft's datatype id of the key (a concatenation packs 6 bits per field, first field highest). */
  KEY_TYPE: 4,
  /** __be32 bytes. */
  KEY_LEN: 5,
  /** __be32: nft's datatype id of a map's data (NFT_DATA_VERDICT for a verdict map). */
  DATA_TYPE: 6,
  DATA_LEN: 7,
  /** __be64 ms: the default timeout of its elements. */
  TIMEOUT: 11,
  /** Binary: TLVs of libnftnl (enum nftnl_udata_set_types). */
  USERDATA: 13,
  /** __be64 */
  HANDLE: 16,
} as const;

/** enum nft_set_flags (<linux/netfilter/nf_tables.h>). */
export const NFT_SET_F = { ANONYMOUS: 0x1, CONSTANT: 0x2, INTERVAL: 0x4, MAP: 0x8, TIMEOUT: 0x10, EVAL: 0x20, OBJECT: 0x40, CONCAT: 0x80, EXPR: 0x100 } as const;

/** The TLV type of a set's comment in its NFTA_SET_USERDATA (libnftnl: enum nftnl_udata_set_types NFTNL_UDATA_SET_COMMENT). */
export const NFTNL_UDATA_SET_COMMENT = 7;
