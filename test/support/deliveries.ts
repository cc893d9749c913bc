import { expect } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import type { PartnerFixture } from "../factories/partners.ts";
import type { TestApp } from "./app.ts";
import { rest } from "./clients.ts";
import { eventually } from "./wait.ts";

/** Reading a partner's webhook deliveries and their attempts as stored, and sending test events. */
export function deliveryProbe(t: TestApp, partner: PartnerFixture) {
  const delivery = async (id: string) => {
    const [row] = await sql<Record<string, any>>(
      t.app.orm.em.fork(),
      "select * from webhook_deliveries where id = $1",
      [id],
    );
    return row as Record<string, any>;
  };
  const attempts = (id: string) =>
    sql<Record<string, any>>(
      t.app.orm.em.fork(),
      "select * from webhook_attempts where delivery_id = $1 order by attempt",
      [id],
    );
  const sendTest = async (webhookId: string, eventType?: string) => {
    const res = await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${webhookId}/test`, {
      key: partner.sandboxKey,
      body: eventType ? { eventType } : {},
    });
    expect(res.status).toBe(200);
    return res.body as { id: string; eventId: string; status: string; test: boolean };
  };
  /** Waits until the worker has recorded `n` attempts for the delivery. */
  const attemptsReach = (id: string, n: number) =>
    eventually(async () => ((await attempts(id)).length >= n ? attempts(id) : undefined), {
      what: `${n} attempts of ${id}`,
    });
  return { delivery, attempts, sendTest, attemptsReach };
}
