/**
 * IPVS over generic netlink: a thin client around the npm package
 * `netlink@0.3.0` (its GenericNetlinkSocket), using codec.ts for every
 * payload. One client = one netlink socket.
 *
 * What the package needs from us (measured on Linux 6.18 with nlctrl
 * GET_FAMILY requests, since this host has no IPVS):
 * - Receive-buffer overflow is fatal to the PROCESS: when recvmsg() fails
 *   with ENOBUFS, the native addon calls std::terminate ("terminate called
 *   after throwing an instance of 'Napi::Error'", SIGABRT) whether or not an
 *   'error' listener is attached. With the default 208 KiB SO_RCVBUF, 150
 *   concurrent nlctrl requests aborted the process (100 did not; with 8 MiB,
 *   3000 completed). So the client raises SO_RCVBUF
 *   (default 8 MiB, capped by the kernel at net.core.rmem_max: the package
 *   has no SO_RCVBUFFORCE) and never has more than `maxInFlight` (64)
 *   requests outstanding.
 * - Errors come as plain `Error("Request rejected: ENOENT")` (netlink.js
 *   checkError); {@link netlinkErrorCode} recovers the errno name and the
 *   client throws {@link IpvsRequestError} with `code`/`errno`.
 * - Its multipart reassembly keeps ONE partial dump per socket and closes it
 *   as soon as any other message arrives, and the kernel refuses a second
 *   dump on a socket while one runs (EBUSY). So dumps run alone: a dump waits
 *   for outstanding requests to finish and holds new ones until it is done.
 * - An error code the kernel puts in NLMSG_DONE is ignored by the package
 *   (IPVS dump handlers never set one, so nothing is lost for IPVS).
 * - Its typings mark RawNetlinkSocketOptions.recvBufferSize/sendBufferSize as
 *   required; the client sets the buffer after creating the socket instead.
 * - A request that times out leaves the package waiting for a late reply
 *   that could corrupt the next dump, so a timeout (like a socket error)
 *   closes the client: every pending and later call rejects with
 *   {@link IpvsClientClosedError}; open a new client.
 *
 * Resolving the family may load the ip_vs module: genetlink requests module
 * "net-pf-16-proto-16-family-IPVS", an alias ip_vs_ctl.c declares
 * (MODULE_ALIAS_GENL_FAMILY, added in late 2021) on newer kernels. Every IPVS command needs CAP_NET_ADMIN (EPERM otherwise).
 */
import { constants as osConstants } from 'node:os';
import { createGenericNetlink, genl, type GenericNetlinkSocket } from 'netlink';
import {
  AF_INET,
  AF_INET6,
  IPVS_CMD,
  IPVS_GENL_NAME,
  IPVS_GENL_VERSION,
  IpvsUnsupportedError,
  decodeDest,
  decodeInfo,
  decodeService,
  encodeDelDest,
  encodeDelService,
  encodeGetDests,
  encodeGetService,
  encodeNewDest,
  encodeNewService,
  encodeSetDest,
  encodeSetService,
  type DestEntry,
  type IpvsInfo,
  type RealServer,
  type RealServerKey,
  type ServiceEntry,
  type VirtualServer,
  type VirtualServerKey,
} from './codec.ts';
import { DroverError } from '../../errors.ts';
import { isNoSuchService, isNotFound, netlinkErrorCode } from '../netlink/errno.ts';

/** NLM_F_DUMP = NLM_F_ROOT | NLM_F_MATCH (<linux/netlink.h>). */
const NLM_F_DUMP = 0x300;

/** The running kernel has no IPVS (module absent or not loadable). */
export class IpvsUnavailableError extends DroverError {
  constructor() {
    super('IPVS is not available in this kernel (generic netlink family IPVS not found)');
    this.name = 'IpvsUnavailableError';
  }
}

/** The kernel rejected an IPVS command. */
export class IpvsRequestError extends DroverError {
  constructor(
    /** Command name, e.g. "NEW_DEST". */
    readonly command: string,
    /** errno name, e.g. "ESRCH"; "E?" followed by the number when Node does not know it. */
    readonly code: string,
    /** Positive errno, when known. */
    readonly errno: number | undefined,
  ) {
    const hint = ERRNO_HINTS[`${command} ${code}`] ?? ERRNO_HINTS[`* ${code}`];
    super(`IPVS ${command} failed: ${code}${hint ? ` (${hint})` : ''}`);
    this.name = 'IpvsRequestError';
  }
}

/** The client was closed (by close(), a request timeout or a socket error); open a new one. */
export class IpvsClientClosedError extends DroverError {
  constructor(readonly reason: string) {
    super(`IPVS netlink client is closed: ${reason}`);
    this.name = 'IpvsClientClosedError';
  }
}

/** What the kernel's errors mean per command (ipvsadm libipvs ipvs_strerror). */
const ERRNO_HINTS: Readonly<Record<string, string>> = {
  'NEW_SERVICE EEXIST': 'service already exists',
  'NEW_SERVICE ENOENT': 'scheduler not found',
  'SET_SERVICE ESRCH': 'no such service',
  'SET_SERVICE ENOENT': 'scheduler not found',
  'DEL_SERVICE ESRCH': 'no such service',
  'GET_SERVICE ESRCH': 'no such service',
  'NEW_DEST ESRCH': 'service not defined',
  'NEW_DEST EEXIST': 'destination already exists',
  'SET_DEST ESRCH': 'service not defined',
  'SET_DEST ENOENT': 'no such destination',
  'DEL_DEST ESRCH': 'service not defined',
  'DEL_DEST ENOENT': 'no such destination',
  '* EPERM': 'CAP_NET_ADMIN is required',
  '* ERANGE': 'weight or threshold out of range',
  '* EINVAL': 'invalid request',
};

/** The errno name in an error of `netlink@0.3.0` (defined with the errno predicates in shared/errno.ts). */
export { netlinkErrorCode };

/** Positive errno of an errno name ("ENOENT" → 2), when Node knows it. */
export function errnoOf(code: string): number | undefined {
  return (osConstants.errno as Record<string, number | undefined>)[code];
}

/**
 * The part of a generic netlink socket the client uses; {@link openPackageTransport}
 * wraps `netlink@0.3.0`, tests pass a fake.
 */
export interface GenlTransport {
  /**
   * Family id of a generic netlink family.
   * @throws the package's "Request rejected: ENOENT" error when there is none.
   */
  resolveFamily(name: string): Promise<number>;
  /**
   * One request with NLM_F_REQUEST | NLM_F_ACK (| NLM_F_DUMP): resolves with
   * the attribute payloads (after the genl header) of the reply messages,
   * [] for a bare ACK.
   */
  request(family: number, cmd: number, payload: Buffer, opts: { readonly dump: boolean; readonly timeoutMs: number }): Promise<Buffer[]>;
  /** Register the handler of socket-level errors (never thrown, only reported). */
  onError(handler: (err: Error) => void): void;
  /** Actual SO_RCVBUF in bytes, as getsockopt reports it (the kernel doubles the request). */
  recvBufferBytes(): number;
  close(): void;
}

/**
 * A {@link GenlTransport} over `netlink@0.3.0`.
 * @param recvBufferBytes SO_RCVBUF to request (capped by net.core.rmem_max).
 */
export function openPackageTransport(recvBufferBytes: number): GenlTransport {
  const sock: GenericNetlinkSocket = createGenericNetlink();
  try {
    sock.socket.setRecvBufferSize(recvBufferBytes);
  } catch (err) {
    sock.socket.close();
    throw err;
  }
  return {
    async resolveFamily(name) {
      const [reply] = await sock.ctrlRequest(genl.Commands.GET_FAMILY, { familyName: name });
      if (reply?.familyId === undefined) throw new Error(`generic netlink family ${name}: reply has no family id`);
      return reply.familyId;
    },
    async request(family, cmd, payload, opts) {
      const [msgs] = await sock.request(family, cmd, IPVS_GENL_VERSION, payload, {
        flags: opts.dump ? NLM_F_DUMP : 0,
        timeout: opts.timeoutMs,
      });
      return msgs.map((m) => m.data);
    },
    onError(handler) {
      // NetlinkSocket re-emits the raw socket's errors; without a listener
      // EventEmitter would throw them.
      sock.socket.on('error', handler);
    },
    recvBufferBytes: () => sock.socket.getRecvBufferSize(),
    close: () => sock.socket.close(),
  };
}

/** Options of {@link IpvsClient.open}. */
export interface IpvsClientOptions {
  /** Requests outstanding at once, 1-256 (default 64). */
  readonly maxInFlight?: number;
  /** SO_RCVBUF to request, bytes (default 8 MiB). */
  readonly recvBufferBytes?: number;
  /** Per-request timeout, ms (default 10 000). A timeout closes the client. */
  readonly timeoutMs?: number;
}

/** A dump's decoded entries, and one line for each entry the codec does not model (fwmark, IPv6). */
export interface DumpResult<T> {
  readonly entries: T[];
  readonly unsupported: string[];
}

/**
 * FIFO scheduler: shared tasks run up to `max` at a time; an exclusive task
 * runs alone. A waiting exclusive task holds back the shared tasks behind it,
 * so dumps are not starved.
 */
export class RequestScheduler {
  private readonly queue: { exclusive: boolean; start: () => void }[] = [];
  private running = 0;
  private exclusiveRunning = false;

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxInFlight ${max} must be a positive integer`);
  }

  /** Tasks running now. */
  get inFlight(): number {
    return this.running;
  }

  /** Run `fn` when its turn comes; resolves or rejects as `fn` does. */
  run<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        exclusive,
        start: () => {
          this.running++;
          if (exclusive) this.exclusiveRunning = true;
          let p: Promise<T>;
          try {
            p = fn();
          } catch (err) {
            p = Promise.reject(err);
          }
          p.then(resolve, reject).finally(() => {
            this.running--;
            if (exclusive) this.exclusiveRunning = false;
            this.pump();
          });
        },
      });
      this.pump();
    });
  }

  private pump(): void {
    for (;;) {
      const head = this.queue[0];
      if (!head || this.exclusiveRunning) return;
      if (head.exclusive ? this.running > 0 : this.running >= this.max) return;
      this.queue.shift();
      head.start();
    }
  }
}

const COMMAND_NAMES = new Map<number, string>(Object.entries(IPVS_CMD).map(([name, n]) => [n, name]));

/**
 * An IPVS client on one generic netlink socket. Create with {@link IpvsClient.open}.
 * Every method validates its input through the codec before anything is sent
 * (IpvsValidationError), and rejects with IpvsRequestError when the kernel
 * refuses the command.
 */
export class IpvsClient {
  private closedReason: string | undefined;
  private rejectClosed!: (err: Error) => void;
  private readonly closed: Promise<never>;
  private readonly scheduler: RequestScheduler;
  private readonly timeoutMs: number;

  private constructor(
    private readonly transport: GenlTransport,
    /** Generic netlink family id of IPVS on this kernel. */
    readonly familyId: number,
    options: IpvsClientOptions,
  ) {
    const maxInFlight = options.maxInFlight ?? 64;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1 || maxInFlight > 256) {
      throw new RangeError(`maxInFlight ${maxInFlight} is out of range 1-256`);
    }
    this.scheduler = new RequestScheduler(maxInFlight);
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.closed = new Promise<never>((_, reject) => {
      this.rejectClosed = reject;
    });
    this.closed.catch(() => undefined); // observed by the race in send(); never unhandled
    transport.onError((err) => this.shutDown(`socket error: ${err.message}`));
  }

  /**
   * Open a socket and resolve the IPVS family.
   * @throws IpvsUnavailableError when the kernel has no IPVS family (ENOENT).
   */
  static async open(options: IpvsClientOptions = {}): Promise<IpvsClient> {
    return IpvsClient.withTransport(openPackageTransport(options.recvBufferBytes ?? 8 * 1024 * 1024), options);
  }

  /**
   * Like {@link open} over a given transport (closed on failure).
   * @throws IpvsUnavailableError when the family resolves to ENOENT.
   */
  static async withTransport(transport: GenlTransport, options: IpvsClientOptions = {}): Promise<IpvsClient> {
    let familyId: number;
    try {
      familyId = await transport.resolveFamily(IPVS_GENL_NAME);
    } catch (err) {
      transport.close();
      if (isNotFound(err)) throw new IpvsUnavailableError();
      throw err;
    }
    try {
      return new IpvsClient(transport, familyId, options);
    } catch (err) {
      transport.close();
      throw err;
    }
  }

  /** SO_RCVBUF actually in force, bytes. */
  get recvBufferBytes(): number {
    return this.transport.recvBufferBytes();
  }

  /** IPVS version and connection table size (IPVS_CMD_GET_INFO). */
  async getInfo(): Promise<IpvsInfo> {
    const [reply] = await this.send(IPVS_CMD.GET_INFO, Buffer.alloc(0), false);
    if (!reply) throw new Error('IPVS GET_INFO: no reply');
    return decodeInfo(reply);
  }

  /** Every service (IPVS_CMD_GET_SERVICE dump); fwmark and IPv6 services are listed in `unsupported`. */
  async dumpServices(): Promise<DumpResult<ServiceEntry>> {
    return collect(await this.send(IPVS_CMD.GET_SERVICE, Buffer.alloc(0), true), decodeService);
  }

  /** One service, or undefined when there is none (IPVS_CMD_GET_SERVICE, ESRCH). */
  async getService(key: VirtualServerKey): Promise<ServiceEntry | undefined> {
    try {
      const [reply] = await this.send(IPVS_CMD.GET_SERVICE, encodeGetService(key), false);
      return reply ? decodeService(reply) : undefined;
    } catch (err) {
      if (err instanceof IpvsRequestError && isNoSuchService(err)) return undefined;
      throw err;
    }
  }

  /** The destinations of a service (IPVS_CMD_GET_DEST dump); empty for an unknown service. */
  async dumpDests(key: VirtualServerKey): Promise<DumpResult<DestEntry>> {
    // Before Linux 4.2 a destination has no ADDR_FAMILY: it is of the service's family.
    const family = key.address.includes(':') ? AF_INET6 : AF_INET;
    return collect(await this.send(IPVS_CMD.GET_DEST, encodeGetDests(key), true), (payload) => decodeDest(payload, family));
  }

  /** Add a service. EEXIST if it exists, ENOENT if the scheduler is unknown. */
  async newService(vs: VirtualServer): Promise<void> {
    await this.send(IPVS_CMD.NEW_SERVICE, encodeNewService(vs), false);
  }

  /** Change a service's scheduler, persistence and netmask. ESRCH if absent. */
  async setService(vs: VirtualServer): Promise<void> {
    await this.send(IPVS_CMD.SET_SERVICE, encodeSetService(vs), false);
  }

  /** Delete a service and its destinations. ESRCH if absent. */
  async delService(key: VirtualServerKey): Promise<void> {
    await this.send(IPVS_CMD.DEL_SERVICE, encodeDelService(key), false);
  }

  /** Add a destination. ESRCH no service, EEXIST destination exists. */
  async newDest(vs: VirtualServerKey, rs: RealServer): Promise<void> {
    await this.send(IPVS_CMD.NEW_DEST, encodeNewDest(vs, rs), false);
  }

  /** Change a destination's weight, forwarding and thresholds. ESRCH / ENOENT if absent. */
  async setDest(vs: VirtualServerKey, rs: RealServer): Promise<void> {
    await this.send(IPVS_CMD.SET_DEST, encodeSetDest(vs, rs), false);
  }

  /** Delete a destination. ESRCH / ENOENT if absent. */
  async delDest(vs: VirtualServerKey, rs: RealServerKey): Promise<void> {
    await this.send(IPVS_CMD.DEL_DEST, encodeDelDest(vs, rs), false);
  }

  /** Delete every service of this network namespace (IPVS_CMD_FLUSH). */
  async flush(): Promise<void> {
    await this.send(IPVS_CMD.FLUSH, Buffer.alloc(0), false);
  }

  /** Close the socket; pending and later calls reject with IpvsClientClosedError. Idempotent. */
  close(): void {
    this.shutDown('closed');
  }

  private shutDown(reason: string): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    this.rejectClosed(new IpvsClientClosedError(reason));
    this.transport.close();
  }

  private send(cmd: number, payload: Buffer, dump: boolean): Promise<Buffer[]> {
    const name = COMMAND_NAMES.get(cmd) ?? String(cmd);
    return this.scheduler.run(dump, async () => {
      if (this.closedReason !== undefined) throw new IpvsClientClosedError(this.closedReason);
      try {
        return await Promise.race([
          this.transport.request(this.familyId, cmd, payload, { dump, timeoutMs: this.timeoutMs }),
          this.closed,
        ]);
      } catch (err) {
        if (err instanceof IpvsClientClosedError) throw err;
        const code = netlinkErrorCode(err);
        if (code !== undefined) throw new IpvsRequestError(name, code, errnoOf(code) ?? numericErrno(code));
        // Timeout or send failure: the socket's request state can no longer be trusted.
        const message = err instanceof Error ? err.message : String(err);
        this.shutDown(`${name}: ${message}`);
        throw new IpvsClientClosedError(`${name}: ${message}`);
      }
    });
  }
}

function numericErrno(code: string): number | undefined {
  const m = /^E\?(\d+)$/.exec(code);
  return m ? Number(m[1]) : undefined;
}

function collect<T>(payloads: readonly Buffer[], decode: (p: Buffer) => T): DumpResult<T> {
  const entries: T[] = [];
  const unsupported: string[] = [];
  for (const p of payloads) {
    try {
      entries.push(decode(p));
    } catch (err) {
      if (err instanceof IpvsUnsupportedError) unsupported.push(err.message);
      else throw err;
    }
  }
  return { entries, unsupported };
}
