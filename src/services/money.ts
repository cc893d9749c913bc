import { createBooksService } from "../disbursements/books.service.ts";
import { createDisbursementService } from "../disbursements/disbursement.service.ts";
import { createMandateService } from "../disbursements/mandate.service.ts";
import { createPaystackProvider } from "../disbursements/paystack.ts";
import { sandboxProvider } from "../disbursements/provider.ts";
import { createProviderWebhooks } from "../disbursements/provider-webhooks.ts";
import { createRefundService } from "../disbursements/refund.service.ts";
import { createRepaymentService } from "../disbursements/repayment.service.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import type { CoreServices } from "./core.ts";
import type { ServiceDeps } from "./deps.ts";
import type { PeopleServices } from "./people.ts";

/** Money: mandates, disbursements and their payouts, repayments and refunds, the partner's books. */
export function moneyServices(deps: ServiceDeps, core: CoreServices, people: PeopleServices, outbox: Outbox) {
  const { config, clock, box, jobs, logger } = deps;
  const { users, partners, ledger, instruments, metrics } = core;
  // Production pays through the HTTP provider when it is configured; sandbox always through the simulator.
  const paystack = config.paymentProvider
    ? createPaystackProvider({ config: config.paymentProvider, instruments, logger })
    : undefined;
  const books = createBooksService({ box });
  const mandates = createMandateService({
    clock,
    box,
    users,
    partners,
    person: people.person,
    jobs,
    publicUrl: deps.publicUrl,
  });
  const disbursements = createDisbursementService({
    clock,
    consents: people.consents,
    partners,
    books,
    mandates,
    jobs,
    outbox,
    providers: paystack ? { sandbox: sandboxProvider, production: paystack } : { sandbox: sandboxProvider },
    instruments,
    logger,
    metrics,
    leaseMs: config.payoutResumeAfterMs,
    perUserPerDay: config.expensiveLimits.disbursementsPerUserPerDay,
  });
  const leaseMs = config.payoutResumeAfterMs;
  const refunds = createRefundService({ clock, jobs, books, ledger, disbursements, logger, leaseMs });
  const repayments = createRepaymentService({
    clock,
    outbox,
    books,
    ledger,
    disbursements,
    refunds,
    metrics,
  });
  return {
    books,
    mandates,
    disbursements,
    refunds,
    repayments,
    providerWebhooks: createProviderWebhooks({ paystack, disbursements, repayments, refunds, logger }),
  };
}

/** What {@link moneyServices} builds. */
export type MoneyServices = ReturnType<typeof moneyServices>;
