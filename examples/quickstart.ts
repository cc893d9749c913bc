// A partner's first ten minutes, with the SDK (`@partner-underwriting/sdk`): from a sandbox key to a collected
// repayment. Run it with `API_KEY=sk_sandbox_… npm run -s example:quickstart` against `npm start` (BASE_URL
// defaults to http://127.0.0.1:8080). It prints one line per step, and imports nothing but the SDK and Node.
//
// Set up the client. Every POST it sends carries an `Idempotency-Key`, and 429s and 5xx are retried with the
// same key after `Retry-After`.
import http from "node:http";
import {
  CollectRepaymentRequest_Outcome,
  constructWebhookEvent,
  createPartnerClient,
  createSnapshotVerifier,
  Disbursement_Destination,
  type WebhookEvent,
} from "@partner-underwriting/sdk";

const baseUrl = process.env.BASE_URL || "http://127.0.0.1:8080";
const apiKey = process.env.API_KEY ?? "";
if (!apiKey.startsWith("sk_sandbox_")) {
  console.error("Set API_KEY to a partner's sandbox key (sk_sandbox_…): see the README's walk-through.");
  process.exit(2);
}
const api = createPartnerClient({ baseUrl, apiKey });

// 1. Receive webhooks. Verify each one with the subscription's secret before you trust it (the receiver here
// listens on loopback, which the service accepts in local development only; production needs https):

const received: WebhookEvent[] = [];
let secret = "";
const receiver = http.createServer(async (req, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk);
  try {
    const event = await constructWebhookEvent({
      payload: Buffer.concat(chunks),
      signatureHeader: String(req.headers["x-service-signature"]),
      secret,
    });
    received.push(event);
    res.writeHead(200).end();
  } catch {
    res.writeHead(401).end(); // not from the service: ignore it
  }
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const { port } = receiver.address() as { port: number };
const { webhook } = await api.webhooks.createWebhook({
  url: `http://127.0.0.1:${port}/hooks`,
  events: ["*"],
});
secret = webhook?.secret ?? "";
const waitFor = async (type: string, match: (payload: Record<string, unknown>) => boolean = () => true) => {
  for (let i = 0; i < 300; i++) {
    const event = received.find((e) => e.type === type && match(e.payload));
    if (event) return event;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no ${type} webhook arrived`);
};
console.log("1. webhook subscription", webhook?.id);

// 2. Ask a user for consent. In production the user opens `consentLink.url` on their phone; in the sandbox
// you accept for them. `+2348000000001` is the fixture user `usr_sandboxTrusted`:

const { consentLink } = await api.consents.createConsentLink({
  phoneNumber: "+2348000000001",
  scopes: ["standing", "ledger", "repayment_history"],
  ledgerWindowDays: 90,
});
const accepted = await api.sandbox.acceptConsentLink({ id: consentLink?.id ?? "" });
await waitFor("consent.granted");
console.log("2. consent granted", accepted.consentLink?.consentId);

// 3. Read the user's snapshot and verify its signature before anything uses it:

const verifier = createSnapshotVerifier({ baseUrl, apiKey, environment: "sandbox" });
const body = await api.snapshots.getSnapshot({ userId: "usr_sandboxTrusted" });
type Doc = { standing: { tier: string } | null; ledgerWindow?: { inflow: { totalKobo: string } } };
const snapshot = await verifier.verify<Doc>(new TextDecoder().decode(body.data));
console.log(
  "3. verified snapshot: tier",
  snapshot.standing?.tier,
  "inflow",
  snapshot.ledgerWindow?.inflow.totalKobo,
);

// 4. Your own credit decision happens here, outside the service. Then offer the loan: the disbursement waits
// for the person to accept its repayment schedule on the page at `acceptanceUrl` (they prove who they are
// there with a code texted to their phone). Nothing is paid out or debited before they do:

const dueDate = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
const { disbursement } = await api.disbursements.createDisbursement({
  userId: "usr_sandboxTrusted",
  principalKobo: 5_000_000n, // ₦50,000
  destination: Disbursement_Destination.WALLET,
  reference: `loan-${Date.now()}`,
  repaymentSchedule: { installments: [{ dueDate, amountKobo: 5_400_000n }] },
});
const id = disbursement?.id ?? "";
console.log("4. offered", id, "to accept at", disbursement?.acceptanceUrl);

// 5. In production you send `acceptanceUrl` to the person; in the sandbox you accept for them. Then hear that
// the money was delivered:

await api.sandbox.acceptDisbursement({ id });
await waitFor("DISBURSEMENT_DELIVERED", (p) => p.disbursementId === id);
console.log("5. accepted and delivered", id, "fee", String(disbursement?.feeKobo)); // kobo

// 6. The repayment is debited on its due date, exactly as the person accepted it; in the sandbox, collect it now:

const { repayments } = await api.disbursements.listRepayments({ disbursementId: id });
const repaymentId = repayments[0]?.id ?? "";
await api.sandbox.collectRepayment({ id: repaymentId, outcome: CollectRepaymentRequest_Outcome.SUCCESS });
await waitFor("REPAYMENT_COLLECTED", (p) => p.repaymentId === repaymentId);
console.log("6. repayment collected", repaymentId);

// 7. Clean up: remove the subscription, so nothing is sent to your laptop's closed port after this run (a key has
// at most 50 subscriptions).

await api.webhooks.deleteWebhook({ id: webhook?.id ?? "" });
receiver.close();
console.log("7. webhook subscription removed", webhook?.id);
