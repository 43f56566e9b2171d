/**
 * In-memory links and addresses ({@link LinkManager}) for unit tests, with
 * the kernel's answers to adding an address that is there and removing one
 * that is gone.
 */
import type { IPFamily } from '../../model/types.ts';
import { AF_INET6, parseIPAddress } from '../ipvs/codec.ts';
import type { InterfaceAddress, LinkManager } from './link.ts';

/** In-memory links and addresses (LinkManager). */
export class FakeLinks implements LinkManager {
  /** IPv4 address labels (IFA_LABEL), by "index address". */
  private readonly labels = new Map<string, string>();

  /** `noDummy`: answer ensureDummy as a kernel without the dummy driver does (ENOTSUP). */
  constructor(private readonly opts: { readonly noDummy?: boolean } = {}) {}

  /** Every modifying call, in order: "add 10.96.0.10/32", "del 10.96.0.99/32", "create kube-ipvs0". */
  readonly log: string[] = [];
  /** Number of addresses() calls (address dumps). */
  reads = 0;
  private readonly links = new Map<string, { index: number; kind: string; addresses: InterfaceAddress[] }>([
    ['lo', { index: 1, kind: 'loopback', addresses: [{ address: '127.0.0.1', prefixLength: 8 }] }],
  ]);
  private nextIndex = 2;

  async find(name: string): Promise<number | undefined> {
    return this.links.get(name)?.index;
  }

  async ensureDummy(name: string): Promise<{ index: number; created: boolean }> {
    const l = this.links.get(name);
    if (l) return { index: l.index, created: false };
    if (this.opts.noDummy === true) throw new Error(`rtnetlink: create dummy link ${name} failed: ENOTSUP`);
    const index = this.nextIndex++;
    this.links.set(name, { index, kind: 'dummy', addresses: [] });
    this.log.push(`create ${name}`);
    return { index, created: true };
  }

  async addresses(index: number, family: IPFamily = 'IPv4'): Promise<InterfaceAddress[]> {
    this.reads++;
    return this.byIndex(index).addresses.filter((a) => a.address.includes(':') === (family === 'IPv6'));
  }

  async addAddress(index: number, address: string, label?: string): Promise<void> {
    const full = parseIPAddress(address, 'address').af === AF_INET6 ? 128 : 32;
    const l = this.byIndex(index);
    if (!l.addresses.some((a) => a.address === address && a.prefixLength === full)) {
      l.addresses.push({ address, prefixLength: full });
      if (label !== undefined) this.labels.set(`${index} ${address}`, label);
    }
    this.log.push(`add ${address}/${full}${label !== undefined ? ` label ${label}` : ''}`);
  }

  async labelled(label: string): Promise<Array<InterfaceAddress & { readonly index: number }>> {
    return [...this.links.values()].flatMap((l) => l.addresses.filter((a) => this.labels.get(`${l.index} ${a.address}`) === label).map((a) => ({ ...a, index: l.index })));
  }

  async delAddress(index: number, addr: InterfaceAddress): Promise<void> {
    parseIPAddress(addr.address, 'address');
    const l = this.byIndex(index);
    l.addresses = l.addresses.filter((a) => !(a.address === addr.address && a.prefixLength === addr.prefixLength));
    this.labels.delete(`${index} ${addr.address}`);
    this.log.push(`del ${addr.address}/${addr.prefixLength}`);
  }

  async deleteLink(index: number): Promise<void> {
    for (const [name, l] of this.links) {
      if (l.index === index) {
        this.links.delete(name);
        this.log.push(`delete ${name}`);
      }
    }
  }

  /** Addresses of link `name` as "a.b.c.d/len", sorted; undefined when there is no such link. */
  addressesOf(name: string): string[] | undefined {
    return this.links.get(name)?.addresses.map((a) => `${a.address}/${a.prefixLength}`).sort();
  }

  /** Add an address behind drover's back. */
  addByHand(name: string, address: string, prefixLength: number): void {
    this.links.get(name)?.addresses.push({ address, prefixLength });
  }

  private byIndex(index: number): { index: number; kind: string; addresses: InterfaceAddress[] } {
    const l = [...this.links.values()].find((x) => x.index === index);
    if (!l) throw new Error(`rtnetlink: no link with index ${index}: ENODEV`);
    return l;
  }
}
