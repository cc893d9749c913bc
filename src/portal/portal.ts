import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Logger } from "../platform/logger.ts";
import { createAuditService } from "./audit.service.ts";
import { createDeviceCookies } from "./device-cookie.ts";
import { createPeopleService } from "./people.service.ts";
import { createPortalGate } from "./portal.gate.ts";
import { createSessionService } from "./session.service.ts";
import { createSigninService } from "./signin.service.ts";
import type { SigninLimitsSpec } from "./signin-limits.ts";

/** What the portal's people, sessions and audit log are built from. */
export interface PortalOptions {
  clock: Clock;
  box: SecretBox;
  partners: PartnerService;
  logger: Logger;
  /** PUBLIC_URL, or the partner listener once bound: invite links and the portal's own origin. */
  publicUrl: () => string;
  /** True when PUBLIC_URL is set: then its origin is the only one a portal call may come from. */
  publicUrlFixed?: boolean;
  /** The buckets of failed sign-ins (`Config.portalSignin`). */
  signinLimits: SigninLimitsSpec;
}

/** What {@link createPortal} returns. */
export type Portal = ReturnType<typeof createPortal>;

/** The partner portal's back end (docs/portal.md): people, invites, sign-in, sessions and the audit log. */
export function createPortal(o: PortalOptions) {
  const audit = createAuditService({ clock: o.clock, box: o.box });
  const sessions = createSessionService({ clock: o.clock });
  const people = createPeopleService({ ...o, audit, sessions });
  const devices = createDeviceCookies({ clock: o.clock, box: o.box });
  const signin = createSigninService({
    clock: o.clock,
    box: o.box,
    audit,
    sessions,
    devices,
    limits: o.signinLimits,
  });
  const gate = createPortalGate({
    sessions,
    audit,
    publicUrl: o.publicUrl,
    publicUrlFixed: o.publicUrlFixed,
    logger: o.logger,
  });
  return { audit, sessions, people, signin, gate, publicUrl: o.publicUrl, publicUrlFixed: o.publicUrlFixed };
}
