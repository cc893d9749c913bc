import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { SigningKeyService as InternalSigningKeyService } from "../../gen/internal/v1/signing_keys_pb.ts";
import {
  type KeysService,
  type ListKeysResponse,
  ListKeysResponseSchema,
  SigningKey_Status,
  type SigningKeySchema,
} from "../../gen/partner/v1/keys_pb.ts";
import { callerOf, emOf, lazyEmOf } from "../platform/rpc/context.ts";
import { parseEnvironment } from "../platform/tenancy.ts";
import { ENVIRONMENT_HEADER } from "../portal/session.service.ts";
import type { PublishedKey, SigningKeyService } from "./signing-key.service.ts";

/** How long verifiers may cache the key document (SPEC.md: at most 4 hours). */
export const KEY_DOCUMENT_MAX_AGE_SECONDS = 14_400;

/** A published key in the contract's shape. */
export function toSigningKey(k: PublishedKey): MessageInitShape<typeof SigningKeySchema> {
  const x = k.publicKey.toString("base64url");
  return {
    kid: k.kid,
    alg: "Ed25519",
    environment: k.environment,
    sandbox: k.environment === "sandbox",
    publicKey: x,
    jwk: { kty: "OKP", crv: "Ed25519", x },
    status: SigningKey_Status[k.status],
    notBefore: timestampFromDate(k.notBefore),
    notAfter: timestampFromDate(k.notAfter),
  };
}

/** `partner.v1.KeysService`: the caller's environment's key document. */
export function createKeysHandlers(signingKeys: SigningKeyService): ServiceImpl<typeof KeysService> {
  // One immutable response per publication: the REST face then serialises it once, not per request.
  const documents = new WeakMap<PublishedKey[], ListKeysResponse>();
  return {
    async listKeys(_req, ctx) {
      const { environment } = callerOf(ctx.values);
      const keys = await signingKeys.published(lazyEmOf(ctx.values), environment);
      let document = documents.get(keys);
      if (!document) {
        document = create(ListKeysResponseSchema, { keys: keys.map(toSigningKey) });
        documents.set(keys, document);
      }
      // One environment's keys at a URL both environments read: the caller may keep them for four hours, no
      // shared cache may (it could hand sandbox keys to a production verifier, or hide a rotation).
      ctx.responseHeader.set("cache-control", `private, max-age=${KEY_DOCUMENT_MAX_AGE_SECONDS}`);
      ctx.responseHeader.set("vary", `authorization, ${ENVIRONMENT_HEADER}`);
      return document;
    },
  };
}

/** `internal.v1.SigningKeyService`: list and early rotation for operators. */
export function createSigningKeyAdminHandlers(
  signingKeys: SigningKeyService,
): ServiceImpl<typeof InternalSigningKeyService> {
  return {
    async listSigningKeys(req, ctx) {
      const keys = await signingKeys.published(emOf(ctx.values), parseEnvironment(req.environment));
      return { keys: keys.map(toSigningKey) };
    },
    async rotateSigningKey(req, ctx) {
      const em = emOf(ctx.values);
      const environment = parseEnvironment(req.environment);
      const kid = await signingKeys.rotate(em, environment);
      const keys = (await signingKeys.published(em, environment)).map(toSigningKey);
      return { key: keys.find((k) => k.kid === kid), keys };
    },
  };
}
