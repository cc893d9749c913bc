import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

/** A text the fake provider took. */
export interface FakeText {
  to: string;
  from: string;
  sms: string;
  channel: string;
}

/** A local server speaking the Termii-style HTTP API the SMS adapter calls. */
export interface FakeSms {
  url: string;
  apiKey: string;
  /** Every text taken, oldest first. */
  texts: FakeText[];
  /** The 6-digit code of the newest text to `to` (E.164 with or without `+`). */
  lastCode(to: string): string | undefined;
  close(): Promise<void>;
}

/** Starts the fake SMS provider on a loopback port. */
export async function startFakeSms(): Promise<FakeSms> {
  const apiKey = `TL${randomBytes(16).toString("hex")}`;
  const texts: FakeText[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const answer = (status: number, body: object) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (req.method !== "POST" || req.url !== "/api/sms/send") return answer(404, { message: "Not found" });
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return answer(400, { message: "Invalid JSON" });
      }
      if (body.api_key !== apiKey) return answer(401, { message: "Invalid API key" });
      if (typeof body.to !== "string" || typeof body.sms !== "string" || typeof body.from !== "string")
        return answer(422, { message: "to, from and sms are required" });
      texts.push({ to: body.to, from: body.from, sms: body.sms, channel: String(body.channel ?? "") });
      answer(200, {
        code: "ok",
        message_id: `${Date.now()}${randomBytes(4).toString("hex")}`,
        message: "Successfully Sent",
        balance: 1000,
        user: "Fake",
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    texts,
    lastCode(to) {
      const digits = to.replace(/^\+/, "");
      const text = texts.filter((t) => t.to === digits).at(-1);
      return text ? /\b(\d{6})\b/.exec(text.sms)?.[1] : undefined;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * An SMS provider configuration for tests whose people answer through the platform's prompt sessions: it lets
 * production create consent links and disbursements, and no text is ever sent to it (port 9 is discard).
 */
export const unusedSmsProvider = {
  baseUrl: "http://127.0.0.1:9",
  apiKey: "unused-sms-key",
  senderId: "Test",
  timeoutMs: 1_000,
};
