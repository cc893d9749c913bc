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
  reference: string;
  amount: number;
  authorizationCode: string;
  email: string;
  status: string;
  gatewayResponse: string;
}

/** A local server speaking the Paystack-style HTTP API the production adapter calls. */
export interface FakePaystack {
  url: string;
  secretKey: string;
  /** Every transfer made, by reference: one reference is one movement of money. */
  transfers: Map<string, FakeTransfer>;
  /** Every charge made, by reference. */
  charges: Map<string, FakeCharge>;
  /** Every request, as `METHOD path`. */
  calls: string[];
  /** The status a new transfer gets (default `success`). */
  transferStatus: (transfer: FakeTransfer) => string;
  /** The status and gateway response a new charge gets (default `success`). */
  chargeStatus: (charge: FakeCharge) => { status: string; gatewayResponse: string };
  /** The amount a new charge is made for (default: the amount asked; a misbehaving provider takes more). */
  chargeAmount: (asked: number) => number;
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
    calls: [],
    transferStatus: () => "success",
    chargeStatus: () => ({ status: "success", gatewayResponse: "Approved" }),
    chargeAmount: (asked) => asked,
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
    const path = (req.url ?? "").split("?")[0] ?? "";
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
    reference: charge.reference,
    amount: charge.amount,
    status: charge.status,
    gateway_response: charge.gatewayResponse,
    authorization: { authorization_code: charge.authorizationCode },
    customer: { email: charge.email },
  };
}
