import { createHmac, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

/** A transfer the fake provider holds. */
export interface FakeTransfer {
  reference: string;
  amount: number;
  recipient: string;
  currency: string;
  status: string;
}

/** A charge against an authorisation the fake provider holds. */
export interface FakeCharge {
  /** The provider's own id of the transaction (its refunds name it). */
  id: number;
  reference: string;
  amount: number;
  authorizationCode: string;
  email: string;
  status: string;
  gatewayResponse: string;
}

/** A refund of a charge the fake provider holds. */
export interface FakeRefund {
  id: number;
  /** The refunded charge's id. */
  transaction: number;
  transactionReference: string;
  amount: number;
  currency: string;
  status: string;
  merchantNote: string;
}

/** A local server speaking the Paystack-style HTTP API the production adapter calls. */
export interface FakePaystack {
  url: string;
  secretKey: string;
  /** Every transfer made, by reference: one reference is one movement of money. */
  transfers: Map<string, FakeTransfer>;
  /** Every charge made, by reference. */
  charges: Map<string, FakeCharge>;
  /** Every refund made, by its id. */
  refunds: Map<number, FakeRefund>;
  /** Every request, as `METHOD path`. */
  calls: string[];
  /** The status a new transfer gets (default `success`). */
  transferStatus: (transfer: FakeTransfer) => string;
  /** The status and gateway response a new charge gets (default `success`). */
  chargeStatus: (charge: FakeCharge) => { status: string; gatewayResponse: string };
  /** The amount a new charge is made for (default: the amount asked; a misbehaving provider takes more). */
  chargeAmount: (asked: number) => number;
  /** The status a new refund gets (default `processed`; the real provider answers `pending` first). */
  refundStatus: (refund: FakeRefund) => string;
  /** The amount a new refund is made for (default: the amount asked). */
  refundAmount: (asked: number) => number;
  /** The next this many POSTs make their movement, then answer 500 as if the connection had dropped. */
  loseResponses: number;
  /** Sends a webhook signed with the secret key (or `signature`), as the provider does; answers the status. */
  sendWebhook(url: string, event: string, data: object, signature?: string): Promise<number>;
  close(): Promise<void>;
}

/** Starts the fake provider on a loopback port. */
export async function startFakePaystack(): Promise<FakePaystack> {
  const secretKey = `sk_test_${randomBytes(20).toString("hex")}`;
  const fake: Omit<FakePaystack, "url" | "close"> = {
    secretKey,
    transfers: new Map(),
    charges: new Map(),
    refunds: new Map(),
    calls: [],
    transferStatus: () => "success",
    chargeStatus: () => ({ status: "success", gatewayResponse: "Approved" }),
    chargeAmount: (asked) => asked,
    refundStatus: () => "processed",
    refundAmount: (asked) => asked,
    loseResponses: 0,
    async sendWebhook(url, event, data, signature) {
      const body = JSON.stringify({ event, data });
      const res = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-paystack-signature": signature ?? createHmac("sha512", secretKey).update(body).digest("hex"),
        },
        body,
      });
      await res.arrayBuffer();
      return res.status;
    },
  };

  const reply = (res: http.ServerResponse, status: number, body: object) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };

  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? "/", "http://fake");
    const path = url.pathname;
    fake.calls.push(`${req.method} ${path}`);
    if (req.headers.authorization !== `Bearer ${secretKey}`)
      return reply(res, 401, { status: false, message: "Invalid key" });
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {};
    const lose = () => {
      if (fake.loseResponses <= 0) return false;
      fake.loseResponses -= 1;
      reply(res, 500, { status: false, message: "Internal error" });
      return true;
    };

    if (req.method === "POST" && path === "/transfer") {
      if (!Number.isInteger(body.amount) || body.amount <= 0 || typeof body.recipient !== "string")
        return reply(res, 400, { status: false, message: "Invalid transfer" });
      if (fake.transfers.has(body.reference))
        return reply(res, 400, { status: false, message: "Transfer reference already exists" });
      const transfer: FakeTransfer = {
        reference: body.reference,
        amount: body.amount,
        recipient: body.recipient,
        currency: body.currency,
        status: "pending",
      };
      transfer.status = fake.transferStatus(transfer);
      fake.transfers.set(transfer.reference, transfer);
      if (lose()) return;
      return reply(res, 200, { status: true, message: "Transfer has been queued", data: transfer });
    }
    const transfer = /^\/transfer\/verify\/([^/]+)$/.exec(path);
    if (req.method === "GET" && transfer) {
      const found = fake.transfers.get(decodeURIComponent(transfer[1] ?? ""));
      return found
        ? reply(res, 200, { status: true, message: "Transfer retrieved", data: found })
        : reply(res, 404, { status: false, message: "Transfer not found" });
    }
    if (req.method === "POST" && path === "/transaction/charge_authorization") {
      if (!Number.isInteger(body.amount) || typeof body.authorization_code !== "string" || !body.email)
        return reply(res, 400, { status: false, message: "Invalid charge" });
      if (fake.charges.has(body.reference))
        return reply(res, 400, { status: false, message: "Duplicate Transaction Reference" });
      const charge: FakeCharge = {
        id: 1_000_000 + fake.charges.size,
        reference: body.reference,
        amount: fake.chargeAmount(body.amount),
        authorizationCode: body.authorization_code,
        email: body.email,
        status: "pending",
        gatewayResponse: "",
      };
      Object.assign(charge, fake.chargeStatus(charge));
      fake.charges.set(charge.reference, charge);
      if (lose()) return;
      return reply(res, 200, { status: true, message: "Charge attempted", data: chargeData(charge) });
    }
    const charge = /^\/transaction\/verify\/([^/]+)$/.exec(path);
    if (req.method === "GET" && charge) {
      const found = fake.charges.get(decodeURIComponent(charge[1] ?? ""));
      return found
        ? reply(res, 200, { status: true, message: "Verification successful", data: chargeData(found) })
        : reply(res, 400, { status: false, message: "Transaction reference not found" });
    }
    if (req.method === "POST" && path === "/refund") {
      // `transaction` is the charge's reference or its id; the amount defaults to the whole charge.
      const charge = [...fake.charges.values()].find(
        (c) => c.reference === body.transaction || String(c.id) === String(body.transaction),
      );
      if (!charge) return reply(res, 404, { status: false, message: "Transaction not found" });
      if (charge.status !== "success")
        return reply(res, 400, { status: false, message: "Transaction cannot be refunded" });
      const asked = body.amount === undefined ? charge.amount : body.amount;
      const refunded = [...fake.refunds.values()]
        .filter((r) => r.transaction === charge.id && r.status !== "failed")
        .reduce((sum, r) => sum + r.amount, 0);
      if (!Number.isInteger(asked) || asked <= 0 || refunded + asked > charge.amount)
        return reply(res, 400, {
          status: false,
          message: "Refund amount cannot be more than the transaction amount",
        });
      const refund: FakeRefund = {
        id: 5_000_000 + fake.refunds.size,
        transaction: charge.id,
        transactionReference: charge.reference,
        amount: fake.refundAmount(asked),
        currency: body.currency ?? "NGN",
        status: "pending",
        merchantNote: body.merchant_note ?? "",
      };
      refund.status = fake.refundStatus(refund);
      fake.refunds.set(refund.id, refund);
      if (lose()) return;
      return reply(res, 200, {
        status: true,
        message: "Refund has been queued for processing",
        data: {
          ...refundData(refund),
          transaction: { id: charge.id, reference: charge.reference, amount: charge.amount },
        },
      });
    }
    if (req.method === "GET" && path === "/refund") {
      const transaction = url.searchParams.get("transaction");
      const list = [...fake.refunds.values()].filter(
        (r) => transaction === null || String(r.transaction) === transaction,
      );
      return reply(res, 200, {
        status: true,
        message: "Refunds retrieved",
        data: list.map(refundData),
        meta: { total: list.length, page: 1, pageCount: 1 },
      });
    }
    reply(res, 404, { status: false, message: "Not found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(fake, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

function chargeData(charge: FakeCharge) {
  return {
    id: charge.id,
    reference: charge.reference,
    amount: charge.amount,
    status: charge.status,
    gateway_response: charge.gatewayResponse,
    authorization: { authorization_code: charge.authorizationCode },
    customer: { email: charge.email },
  };
}

function refundData(refund: FakeRefund) {
  return {
    id: refund.id,
    transaction: refund.transaction,
    amount: refund.amount,
    deducted_amount: refund.amount,
    currency: refund.currency,
    status: refund.status,
    merchant_note: refund.merchantNote,
    customer_note: "",
    channel: "card",
  };
}
