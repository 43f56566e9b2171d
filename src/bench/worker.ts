/**
 * A measuring worker of `drover bench`, started by worker-client.ts inside
 * the node namespace (`ip netns exec NODE node worker.ts`), because IPVS and
 * rtnetlink sockets act on the namespace of their process. It reads one
 * WorkerJob (JSON) from stdin, measures that mode and size with the real
 * kernel (measure.ts), and prints WorkerMessage lines on stdout. Exit code
 * 0 after `done`, 1 after `error`.
 */
import { SystemIptables, toIptablesVariant } from '../modes/iptables/exec.ts';
import { SystemIpset } from '../modes/ipvs/ipset.ts';
import { RtnlLinkManager } from '../modes/ipvs/link.ts';
import { IpvsClient } from '../modes/ipvs/netlink.ts';
import { ProcSysctls } from '../modes/ipvs/sysctl.ts';
import { Prober } from './datapath.ts';
import { ipvsHarness } from '../modes/ipvs/bench-harness.ts';
import { measureSize } from './measure.ts';
import { BENCH_CLUSTER_CIDR } from './synth.ts';
import type { Sample } from './types.ts';
import type { WorkerJob, WorkerMessage } from './worker-client.ts';

const say = (msg: WorkerMessage): void => {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
};

async function readJob(): Promise<WorkerJob> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return JSON.parse(text) as WorkerJob;
}

async function main(): Promise<void> {
  const job = await readJob();
  if (job.mode !== 'ipvs') throw new Error(`the bench worker measures ipvs mode only, not ${job.mode}`);
  const variant = toIptablesVariant(job.iptablesVariant);
  // Generous timeouts: an emulated guest is ~25x slower than a host.
  const ipvs = await IpvsClient.open({ timeoutMs: 120_000 });
  let links: RtnlLinkManager | undefined;
  let h: ReturnType<typeof ipvsHarness> | undefined;
  let prober: Prober | undefined;
  try {
    links = new RtnlLinkManager();
    const rtnl = links;
    h = ipvsHarness(
      {
        ipvs,
        ipset: new SystemIpset(900_000),
        iptables: new SystemIptables({ variant, timeoutMs: 900_000 }),
        links: rtnl,
        sysctls: new ProcSysctls(),
        close: () => undefined,
      },
      { iptablesVariant: job.iptablesVariant, render: { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false } },
    );
    prober = await Prober.start(job.view.client);
    const run = await measureSize(
      h,
      prober,
      job.view,
      job.n,
      job.measure,
      job.wholeRepeats,
      job.fullBaselineMax,
      (sample: Sample) => say({ t: 'sample', ...sample }),
      (phase, step, note) => say({ t: 'progress', phase, step, ...(note ? { note } : {}) }),
    );
    say({ t: 'done', run });
  } finally {
    h?.close();
    links?.close();
    ipvs.close();
    await prober?.close();
  }
}

// Exit explicitly: a socket or timer left open must not keep the worker (and the bench waiting for it) alive.
main().then(
  () => process.exit(0),
  (err: unknown) => {
    say({ t: 'error', message: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  },
);
