import type net from "node:net";

/** What {@link createIdleConnections} returns. */
export interface IdleConnections {
  /**
   * A new connection from the client counted under `key` (its address's key), idle until its first request,
   * with what uncounts it from the listener's caps.
   */
  add(socket: net.Socket, key: string, uncount: () => void): void;
  /** A closed connection. */
  forget(socket: net.Socket): void;
  /** A request (an HTTP/1.1 request, an HTTP/2 stream) began on the connection: it is not idle while it runs. */
  start(socket: net.Socket): void;
  /** That request ended: with none left in flight, the connection is idle again, as its address's newest. */
  end(socket: net.Socket): void;
  /**
   * Takes out of the set the idle connection to close for a newcomer: the one idle the longest of a client
   * holding more idle connections than any other, or, when none holds more than one, the one idle the longest.
   * Undefined when none is idle.
   */
  takeVictim(): { socket: net.Socket; uncount: () => void } | undefined;
}

/**
 * The connections of a listener that have no request in flight: those that have sent nothing, those part-way
 * through their first request's headers, and keep-alive connections between requests. At its cap a listener
 * closes one of them to admit a new connection: the oldest of the client (address, or IPv6 /64) that holds the
 * most, or, when every client holds one, the one idle the longest. Clients that fill a listener with silent or
 * trickling connections, several per address and re-opening whatever is closed, then only displace their own,
 * however fast they come back; a client with a request to make completes it within a round trip or two, long
 * before it would be the oldest; and a request being served is never cut. Each operation is O(1).
 */
export function createIdleConnections(): IdleConnections {
  const uncounts = new Map<net.Socket, () => void>();
  const keys = new Map<net.Socket, string>();
  const inFlight = new Map<net.Socket, number>();
  // Every idle connection, and each client's, in the order they became idle; clients by how many they hold.
  const idle = new Set<net.Socket>();
  const idleOf = new Map<string, Set<net.Socket>>();
  const holding = new Map<number, Set<string>>();
  let most = 0;

  const regroup = (key: string, from: number, to: number) => {
    const old = holding.get(from);
    old?.delete(key);
    if (old?.size === 0) holding.delete(from);
    if (to === 0) return;
    const group = holding.get(to) ?? new Set<string>();
    holding.set(to, group);
    group.add(key);
    most = Math.max(most, to);
  };
  const markIdle = (socket: net.Socket) => {
    const key = keys.get(socket) as string;
    const set = idleOf.get(key) ?? new Set<net.Socket>();
    idleOf.set(key, set);
    if (set.has(socket)) return;
    set.add(socket);
    idle.add(socket);
    regroup(key, set.size - 1, set.size);
  };
  const unmarkIdle = (socket: net.Socket) => {
    const key = keys.get(socket);
    const set = key === undefined ? undefined : idleOf.get(key);
    if (!key || !set?.delete(socket)) return;
    idle.delete(socket);
    regroup(key, set.size + 1, set.size);
    if (set.size === 0) idleOf.delete(key);
  };
  const forget = (socket: net.Socket) => {
    unmarkIdle(socket);
    uncounts.delete(socket);
    keys.delete(socket);
    inFlight.delete(socket);
  };

  return {
    add(socket, key, uncount) {
      uncounts.set(socket, uncount);
      keys.set(socket, key);
      markIdle(socket);
    },
    forget,
    start(socket) {
      if (!uncounts.has(socket)) return;
      inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
      unmarkIdle(socket);
    },
    end(socket) {
      const left = (inFlight.get(socket) ?? 1) - 1;
      if (left > 0) return void inFlight.set(socket, left);
      inFlight.delete(socket);
      if (uncounts.has(socket) && !socket.destroyed) markIdle(socket);
    },
    takeVictim() {
      while (most > 0 && !holding.has(most)) most -= 1;
      const key = most > 1 ? holding.get(most)?.values().next().value : undefined;
      const socket = key === undefined ? idle.values().next().value : idleOf.get(key)?.values().next().value;
      if (!socket) return undefined;
      const uncount = uncounts.get(socket) as () => void;
      forget(socket);
      return { socket, uncount };
    },
  };
}
