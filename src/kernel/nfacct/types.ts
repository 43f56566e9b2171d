/**
 * The nfacct interface: named packet and byte counters of netfilter's
 * extended accounting (nfnetlink_acct, <linux/netfilter/nfnetlink_acct.h>),
 * which an iptables rule feeds with `-m nfacct --nfacct-name NAME`
 * (iptables-extensions(8)). Objects live per network namespace; creating one
 * needs CAP_NET_ADMIN.
 *
 * Modelled on kube-proxy's pkg/util/nfacct Interface (Ensure, Add, Get,
 * List): {@link Nfacct} has ensure, get and list. Implementations:
 * client.ts (a netlink socket of this process), netns.ts (a helper process
 * in a named namespace), fake.ts (in memory, for tests).
 */

/** One nfacct object as the kernel reports it. */
export interface NfacctCounter {
  /** Its name (at most 31 characters). */
  readonly name: string;
  /** Packets counted (NFACCT_PKTS). */
  readonly packets: number;
  /** Bytes counted (NFACCT_BYTES). */
  readonly bytes: number;
}

/** The nfacct objects of one network namespace. */
export interface Nfacct {
  /**
   * Make sure the object `name` exists: created with counters at 0 when
   * missing, left as it is (counters kept) when there.
   * @throws NfacctNameError for a name {@link checkCounterName} refuses; NfacctError when the kernel refuses
   *   (no nfacct in the kernel, no CAP_NET_ADMIN).
   */
  ensure(name: string): Promise<void>;
  /**
   * {@link ensure} each of `names`, in order, whatever the others give (in
   * one round trip where a call costs one, netns.ts).
   * @returns each name with the error its ensure threw, or undefined when it succeeded.
   * @throws NfacctNameError before anything is sent, for a name checkCounterName refuses.
   */
  ensureEach(names: readonly string[]): Promise<Map<string, Error | undefined>>;
  /**
   * The object `name`.
   * @throws NfacctNotFoundError when it does not exist; NfacctNameError; NfacctError.
   */
  get(name: string): Promise<NfacctCounter>;
  /**
   * Every object of the namespace, in the kernel's order (creation order).
   * @throws NfacctError.
   */
  list(): Promise<NfacctCounter[]>;
  /** Release what the implementation holds (a socket); later calls may open it again. */
  close(): void;
}
