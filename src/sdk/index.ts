/**
 * The partner SDK: what a lending partner needs to integrate, and nothing of the server. Runs in Node
 * and in browsers.
 */

// The partner API's messages and enums, as the REST and Connect clients type them.
export * from "../../gen/partner/v1/consents_pb.ts";
export * from "../../gen/partner/v1/disbursements_pb.ts";
export * from "../../gen/partner/v1/error_pb.ts";
export * from "../../gen/partner/v1/keys_pb.ts";
export * from "../../gen/partner/v1/sandbox_pb.ts";
export * from "../../gen/partner/v1/snapshots_pb.ts";
export * from "../../gen/partner/v1/webhooks_pb.ts";
export * from "./canonical-json.ts";
export * from "./client.ts";
export * from "./snapshots.ts";
export * from "./webhooks.ts";
