import { AsyncLocalStorage } from "node:async_hooks";

/**
 * The request id of the request whose work is running, for the process's last-resort handlers: Node runs an
 * `unhandledRejection` handler in the async context of the promise that was rejected, so a rejection nobody
 * caught is logged with the id of the request that caused it. One `run` per request (an AsyncContextFrame
 * swap in Node 24, not a hook).
 */
export const requestScope = new AsyncLocalStorage<string>();
