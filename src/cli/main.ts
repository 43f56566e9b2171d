/** drover's entry point. */
import { main } from './program.ts';

await main();
