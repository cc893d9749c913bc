// The walk-through's last step: a partner's environment's signing keys, read with the Connect client generated
// from the contract. Run it with `API_KEY=sk_sandbox_… npm run -s example:keys` (BASE_URL defaults to
// http://127.0.0.1:8080, where `npm start` listens).
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { KeysService } from "../gen/partner/v1/keys_pb.ts";

const baseUrl = process.env.BASE_URL || "http://127.0.0.1:8080";
const apiKey = process.env.API_KEY;
if (!apiKey) {
  console.error("Set API_KEY to a partner's key (sk_sandbox_… or sk_live_…): see the README's walk-through.");
  process.exit(2);
}

const transport = createConnectTransport({
  baseUrl,
  httpVersion: "1.1",
  interceptors: [
    (next) => (req) => {
      req.header.set("authorization", `Bearer ${apiKey}`);
      return next(req);
    },
  ],
});
const { keys } = await createClient(KeysService, transport).listKeys({});
for (const k of keys) console.log(k.kid, k.environment, k.publicKey);
