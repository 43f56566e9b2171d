import type { Socket } from 'node:net';

/** Join two sockets both ways; an error on either closes both (join.mjs). */
export declare function joinSockets(a: Socket, b: Socket): void;
