/**
 * The partner SDK: what a lending partner needs to integrate, and nothing of the server. Runs in Node
 * and in browsers.
 */
export * from "./webhooks.ts";
