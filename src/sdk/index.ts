/**
 * The partner SDK: what a lending partner needs to integrate, and nothing of the server. Runs in Node
 * and in browsers.
 */

export * from "./canonical-json.ts";
export * from "./snapshots.ts";
export * from "./webhooks.ts";
