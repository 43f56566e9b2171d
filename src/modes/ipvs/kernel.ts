/**
 * The IPVS I/O the backend needs, as a small interface: IpvsClient
 * (netlink.ts) implements it on the kernel, FakeIpvs (fake.ts) in memory.
 * Also the two I/O helpers built on it: reading the kernel's virtual servers
 * with their destinations, and sending a plan's commands in a valid order.
 */
import type { ServiceEntry, VirtualServerKey } from '../../kernel/ipvs/codec.ts';
import type { IpvsKernel } from '../../kernel/ipvs/interface.ts';
import { virtualServerKey } from './desired.ts';
import { describeOp, type IpvsOp, type KernelVirtualServer } from './reconcile.ts';
import { DroverError } from '../../errors.ts';

export type { IpvsKernel } from '../../kernel/ipvs/interface.ts';

/** What {@link readVirtualServers} found. */
export interface KernelRead {
  /** Virtual servers by key, with their destinations. */
  readonly state: Map<string, KernelVirtualServer>;
  /** One line per entry the codec does not model (fwmark, IPv6): never touched. */
  readonly unsupported: readonly string[];
  /** Netlink requests made. */
  readonly requests: number;
}

/**
 * Dump every virtual server and, for those `interesting` accepts, their
 * destinations. Dumps run one at a time (the client serialises them).
 */
export async function readVirtualServers(kernel: IpvsKernel, interesting: (vs: VirtualServerKey) => boolean): Promise<KernelRead> {
  const services = await kernel.dumpServices();
  const state = new Map<string, KernelVirtualServer>();
  const unsupported = [...services.unsupported];
  const picked = services.entries.filter(interesting);
  const dests = await Promise.all(picked.map((s) => kernel.dumpDests(s)));
  picked.forEach((entry, i) => {
    state.set(virtualServerKey(entry), { entry, dests: dests[i]!.entries });
    unsupported.push(...dests[i]!.unsupported);
  });
  return { state, unsupported, requests: 1 + picked.length };
}

/**
 * Read only the given virtual servers (a partial sync): GET_SERVICE for each,
 * and the destinations of those that exist.
 */
export async function readSomeVirtualServers(kernel: IpvsKernel, keys: readonly VirtualServerKey[]): Promise<KernelRead> {
  const entries = await Promise.all(keys.map((k) => kernel.getService(k)));
  const present = entries.filter((e): e is ServiceEntry => e !== undefined);
  const dests = await Promise.all(present.map((e) => kernel.dumpDests(e)));
  const state = new Map<string, KernelVirtualServer>();
  const unsupported: string[] = [];
  present.forEach((entry, i) => {
    state.set(virtualServerKey(entry), { entry, dests: dests[i]!.entries });
    unsupported.push(...dests[i]!.unsupported);
  });
  return { state, unsupported, requests: keys.length + present.length };
}

/** One command the kernel refused. */
export interface OpFailure {
  readonly op: IpvsOp;
  readonly error: Error;
}

/** Some IPVS commands of a sync failed; the others were applied. */
export class IpvsApplyError extends DroverError {
  constructor(
    readonly failures: readonly OpFailure[],
    readonly total: number,
  ) {
    const first = failures[0]!;
    super(`${failures.length} of ${total} IPVS commands failed; first: ${describeOp(first.op)}: ${first.error.message}`);
    this.name = 'IpvsApplyError';
  }
}

/** Send one command. */
export function sendOp(kernel: IpvsKernel, op: IpvsOp): Promise<void> {
  switch (op.kind) {
    case 'add-service':
      return kernel.newService(op.vs);
    case 'edit-service':
      return kernel.setService(op.vs);
    case 'del-service':
      return kernel.delService(op.vs);
    case 'add-dest':
      return kernel.newDest(op.vs, op.rs);
    case 'edit-dest':
    case 'quiesce-dest':
      return kernel.setDest(op.vs, op.rs);
    case 'del-dest':
      return kernel.delDest(op.vs, op.rs);
  }
}

const PHASE: Readonly<Record<IpvsOp['kind'], number>> = {
  'del-service': 0,
  'add-service': 1,
  'edit-service': 1,
  'add-dest': 2,
  'edit-dest': 2,
  'quiesce-dest': 2,
  'del-dest': 2,
};

/**
 * Send a plan's commands: service deletes, then service adds and edits, then
 * destination commands; within a phase all at once (the client bounds how
 * many are in flight). A failed command does not stop the others.
 * @throws IpvsApplyError listing every failed command, after all were tried.
 */
export async function applyOps(kernel: IpvsKernel, ops: readonly IpvsOp[]): Promise<void> {
  const failures: OpFailure[] = [];
  for (const phase of [0, 1, 2]) {
    const batch = ops.filter((op) => PHASE[op.kind] === phase);
    const results = await Promise.allSettled(batch.map((op) => sendOp(kernel, op)));
    results.forEach((r, i) => {
      if (r.status === 'rejected') failures.push({ op: batch[i]!, error: r.reason instanceof Error ? r.reason : new Error(String(r.reason)) });
    });
  }
  if (failures.length > 0) throw new IpvsApplyError(failures, ops.length);
}
