/**
 * The command line that runs one of drover's own modules as a program with
 * this process's Node.js, for the helpers drover starts in another network
 * namespace (`ip netns exec NS …`), where a netlink socket must be opened
 * by a process of that namespace.
 */
import { fileURLToPath } from 'node:url';

/**
 * argv that runs module `name` (e.g. "worker", without extension) of the
 * folder of `moduleUrl`: the compiled `name.js` when the caller runs from
 * dist/ (its URL ends in .js), else `name.ts` through tsx's loader
 * (resolved from this module, so that the working directory does not
 * matter).
 * @param moduleUrl the caller's `import.meta.url`.
 */
export function moduleArgv(moduleUrl: string, name: string): string[] {
  const ts = moduleUrl.endsWith('.ts');
  const file = new URL(`./${name}.${ts ? 'ts' : 'js'}`, moduleUrl);
  const loader = ts ? ['--import', import.meta.resolve('tsx')] : [];
  return [process.execPath, ...loader, fileURLToPath(file)];
}
