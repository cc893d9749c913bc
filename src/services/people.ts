import { createConsentService } from "../consent/consent.service.ts";
import { createConsentLinkService } from "../consent/consent-link.service.ts";
import { createPersonService } from "../person/person.service.ts";
import { createSmsSender } from "../person/sms.ts";
import { createPortal } from "../portal/portal.ts";
import { createSnapshotService } from "../snapshot/snapshot.service.ts";
import { createStandingService } from "../standing/standing.service.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import type { CoreServices } from "./core.ts";
import type { ServiceDeps } from "./deps.ts";

/** The person and what they decide: consents and consent links, standing, snapshots; the partners' portal. */
export function peopleServices(deps: ServiceDeps, core: CoreServices, outbox: Outbox) {
  const { config, clock, box, logger } = deps;
  const { users, partners } = core;
  const consents = createConsentService({ clock, box, outbox, users, partners });
  const person = createPersonService({
    clock,
    codeKey: deps.dataKeys["person-code"],
    users,
    sms: config.smsProvider ? createSmsSender(config.smsProvider) : undefined,
    logger,
  });
  return {
    consents,
    person,
    consentLinks: createConsentLinkService({
      clock,
      box,
      person,
      users,
      consents,
      partners,
      publicUrl: deps.publicUrl,
      allowLocalRedirects: config.allowLocalWebhooks,
    }),
    standing: createStandingService({ clock, outbox, users, consents }),
    snapshots: createSnapshotService({ clock, signingKeys: core.signingKeys }),
    /** The partner portal's people, sessions and audit log. */
    portal: createPortal({
      clock,
      box,
      partners,
      logger,
      publicUrl: deps.publicUrl,
      publicUrlFixed: config.publicUrl !== undefined,
      signinLimits: config.portalSignin,
    }),
  };
}

/** What {@link peopleServices} builds. */
export type PeopleServices = ReturnType<typeof peopleServices>;
