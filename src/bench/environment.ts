/**
 * Where a benchmark runs: host or emulated guest, kernel, iptables version,
 * CPUs. Only reads files and version strings; touches no kernel state.
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { run } from '../kernel/exec.ts';
import type { BenchEnvironment } from './types.ts';

/** The files and variables guest detection reads (injectable for tests). */
export interface GuestClues {
  /** process.env.DROVER_IN_GUEST (set by scripts/vm/run.sh inside the test guest). */
  readonly inGuestVar?: string | undefined;
  /** /sys/class/dmi/id/sys_vendor and product_name, joined. */
  readonly dmi?: string | undefined;
  /** The "model name" of /proc/cpuinfo. */
  readonly cpuModel?: string | undefined;
}

/**
 * Whether the machine is a QEMU guest, whose times (under TCG emulation)
 * are not comparable with a host's: DROVER_IN_GUEST=1, a DMI vendor or
 * product naming QEMU, or a QEMU CPU model ("QEMU TCG CPU", "QEMU Virtual
 * CPU"). A KVM-accelerated QEMU guest is also labelled, to be on the safe side.
 * @returns the reason, or undefined on a host.
 */
export function guestReason(clues: GuestClues): string | undefined {
  if (clues.inGuestVar === '1') return 'DROVER_IN_GUEST=1';
  if (clues.dmi && /qemu/i.test(clues.dmi)) return `DMI says ${JSON.stringify(clues.dmi.trim())}`;
  if (clues.cpuModel && /qemu/i.test(clues.cpuModel)) return `CPU model ${JSON.stringify(clues.cpuModel)}`;
  return undefined;
}

function readQuietly(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** The version line of `iptables-<variant>`, or "unknown (<why>)". Does not touch netfilter. */
export async function iptablesVersion(variant: string): Promise<string> {
  const res = await run(`iptables-${variant}`, ['--version'], { allowFail: true, timeoutMs: 10_000 }).catch((e: Error) => e);
  if (res instanceof Error) return `unknown (${res.message})`;
  return res.stdout.trim() || `unknown (exit ${res.code})`;
}

/** Detect the environment of this machine now. */
export async function detectEnvironment(opts: { iptablesVariants: readonly string[]; droverVersion: string }): Promise<BenchEnvironment> {
  const cpuList = cpus();
  const cpuModel = cpuList[0]?.model.trim() ?? 'unknown';
  const dmi = [readQuietly('/sys/class/dmi/id/sys_vendor'), readQuietly('/sys/class/dmi/id/product_name')].filter(Boolean).join(' ');
  const reason = guestReason({ inGuestVar: process.env.DROVER_IN_GUEST, dmi, cpuModel });
  const iptables: Record<string, string> = {};
  for (const v of opts.iptablesVariants) iptables[v] = await iptablesVersion(v);
  return {
    date: new Date().toISOString(),
    guest: reason !== undefined,
    guestReason: reason ?? 'none detected',
    kernel: release(),
    iptables,
    cpus: cpuList.length,
    cpuModel,
    loadAverage: loadavg()[0] ?? 0,
    node: process.version,
    drover: opts.droverVersion,
  };
}
