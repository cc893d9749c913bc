import { consentFlow } from "../consent/consent.page.ts";
import type { ConsentLinkService } from "../consent/consent-link.service.ts";
import { mandateFlow } from "../disbursements/mandate.page.ts";
import type { MandateService } from "../disbursements/mandate.service.ts";
import type { HostedPage } from "../edge/dependencies.ts";
import { createHostedPages } from "../person/hosted-pages.service.ts";
import type { PersonService } from "../person/person.service.ts";
import type { Em } from "../platform/db/orm.ts";
import type { ServiceDeps } from "./deps.ts";

/** The hosted pages people open: a consent link, a mandate, and a prompt session that leads to either. */
export function hostedPages(
  deps: ServiceDeps,
  o: { person: PersonService; consentLinks: ConsentLinkService; mandates: MandateService },
): { consent: HostedPage; mandate: HostedPage; prompt: HostedPage } {
  const { person, consentLinks, mandates } = o;
  const pages = createHostedPages({ csrfKey: deps.dataKeys["consent-csrf"], logger: deps.logger });
  const consent = consentFlow(consentLinks);
  const mandate = mandateFlow(mandates);
  /** Opens a prompt session's URL (once): the session, and the hosted page it leads to. */
  const openPrompt = async (em: Em, token: string) => {
    const session = await person.openSession(em, token);
    const page: "consent" | "mandate" = session.subject.startsWith("dsb_") ? "mandate" : "consent";
    const pageToken =
      page === "mandate"
        ? await mandates.pageToken(em, session.subject)
        : await consentLinks.pageToken(em, session.subject);
    return { sessionId: session.id, page, token: pageToken };
  };
  return {
    consent: (em, req, res, requestId) => pages.handle(consent, em, req, res, requestId),
    mandate: (em, req, res, requestId) => pages.handle(mandate, em, req, res, requestId),
    prompt: (em, req, res, requestId) => pages.prompt(em, req, res, requestId, openPrompt),
  };
}
