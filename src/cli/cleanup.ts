/** `drover cleanup`: remove every chain and hook rule drover created, and nothing else. */
import { Command } from 'commander';
import { createLogger } from '../util/log.ts';
import { kernelOptions, type KernelOptions } from './options.ts';
import { createBackend } from './setup.ts';

/** The `cleanup` command. */
export function cleanupCommand(): Command {
  const cmd = new Command('cleanup')
    .description("remove drover's chains and hook rules from the kernel; other rules are left alone")
    .action(async (opts: KernelOptions) => {
      const logger = createLogger(opts.logLevel);
      const backend = await createBackend(opts, { masqueradeAll: false }, logger);
      const result = await backend.cleanup();
      process.stdout.write(`removed ${result.chainsDeleted} chains and ${result.rulesDeleted} hook rules\n`);
    });
  for (const o of kernelOptions()) cmd.addOption(o);
  return cmd;
}
