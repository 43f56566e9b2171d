/**
 * How the bench starts its helper processes (the measuring worker, the
 * kernel listener): each is a module of src/bench/ run by this process's
 * Node.js. Shared by worker-client.ts and kernel-events.ts.
 */
import { moduleArgv } from '../util/node-module.ts';

/**
 * The command line that starts the bench's process `script` (a module next
 * to this one, e.g. `worker`) with this process's Node.js
 * (util/node-module.ts moduleArgv).
 * @param moduleUrl the URL of a module in the folder of `script` (default: this module's, in src/bench/ or dist/bench/).
 */
export function benchScriptCommand(script: string, moduleUrl: string = import.meta.url): string[] {
  return moduleArgv(moduleUrl, script);
}
