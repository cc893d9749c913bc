import { addressKey } from "../ip.ts";

/**
 * Why a new connection was refused: its listener holds all the connections it may (`listener_limit`), or its
 * client address does (`address_limit`). A fixed set, used as a metric label.
 */
export type ConnectionRefusal = "listener_limit" | "address_limit";

/** Caps on one listener's open connections. */
export interface ConnectionCaps {
  /** Open connections the listener holds at most. */
  max: number;
  /**
   * Open connections one client address holds at most (IPv6: one /64), counted by the socket's own remote
   * address; 0 for none, where every connection comes from a load balancer's few addresses.
   */
  maxPerAddress: number;
}

/** One listener's count of its open connections, in all and per client address. */
export interface ConnectionLimits {
  /**
   * Counts a new connection from `address` and returns what uncounts it once it closes (safe to call twice),
   * or says why it is refused; a refused connection is not counted.
   */
  admit(address: string): (() => void) | ConnectionRefusal;
  /** Connections counted now. */
  readonly open: number;
  /** Client addresses with a connection counted now (an address leaves when its last one closes). */
  readonly addresses: number;
}

/**
 * The count a listener consults before a new connection costs anything (no parsing, no timer, no buffer): one
 * number and one map entry per client address that has a connection open, removed when its count drops to 0,
 * so what is kept never grows past the connections themselves.
 */
export function createConnectionLimits(caps: ConnectionCaps): ConnectionLimits {
  const perAddress = new Map<string, number>();
  let open = 0;
  return {
    admit(address) {
      if (caps.maxPerAddress === 0) {
        if (open >= caps.max) return "listener_limit";
        open += 1;
        let counted = true;
        return () => {
          if (counted) open -= 1;
          counted = false;
        };
      }
      // The address first: `listener_limit` then means that this connection alone would be admitted once
      // another closes (which the listener may decide to make happen).
      const key = addressKey(address);
      const held = perAddress.get(key) ?? 0;
      if (held >= caps.maxPerAddress) return "address_limit";
      if (open >= caps.max) return "listener_limit";
      perAddress.set(key, held + 1);
      open += 1;
      let counted = true;
      return () => {
        if (!counted) return;
        counted = false;
        open -= 1;
        const left = (perAddress.get(key) ?? 1) - 1;
        if (left === 0) perAddress.delete(key);
        else perAddress.set(key, left);
      };
    },
    get open() {
      return open;
    },
    get addresses() {
      return perAddress.size;
    },
  };
}
