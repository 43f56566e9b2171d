// @ts-check
/**
 * Join two sockets both ways (what the peer bench's API bridge does at
 * each end, api-bridge.ts and netns-forward.mjs); an error on either closes
 * both. Plain JavaScript so that netns-forward.mjs needs nothing but node.
 * @param {import('node:net').Socket} a @param {import('node:net').Socket} b
 */
export function joinSockets(a, b) {
  a.pipe(b).pipe(a);
  const close = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', close);
  b.on('error', close);
}
