import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { PortalAuthService } from "../../gen/portal/v1/auth_pb.ts";
import { ApiError } from "../platform/errors.ts";
import { emOf } from "../platform/rpc/context.ts";
import { environments } from "../platform/tenancy.ts";
import type { AuditService } from "./audit.service.ts";
import { clearedCookie, deviceCookie, sessionCookie } from "./cookies.ts";
import type { PeopleService } from "./people.service.ts";
import { kPortal, type PortalCall } from "./portal.context.ts";
import type { SessionService } from "./session.service.ts";
import type { SigninService } from "./signin.service.ts";
import { toMember } from "./team.handlers.ts";

/** The portal call the edge admitted. */
export function portalOf(ctx: HandlerContext): PortalCall {
  const portal = ctx.values.get(kPortal);
  if (!portal) throw new Error("portal handler reached without the portal edge");
  return portal;
}

/** The signed-in session of a call the edge admitted with one. */
function sessionOf(ctx: HandlerContext) {
  const session = portalOf(ctx).session;
  if (!session) throw new ApiError("unauthenticated", "Sign in to the portal first.");
  return session;
}

/** Options for {@link createPortalAuthHandlers}. */
export interface PortalAuthHandlersOptions {
  people: PeopleService;
  signin: SigninService;
  sessions: SessionService;
  audit: AuditService;
  publicUrl: () => string;
}

/** `portal.v1.PortalAuthService`: joining, signing in and out. */
export function createPortalAuthHandlers(
  o: PortalAuthHandlersOptions,
): ServiceImpl<typeof PortalAuthService> {
  return {
    async getInvite(req, ctx) {
      const { invite, partnerName } = await o.people.lookup(emOf(ctx.values), req.token);
      return { partnerName, email: invite.email, role: invite.role };
    },
    async acceptInvite(req, ctx) {
      return o.people.accept(emOf(ctx.values), req.token, req.password);
    },
    async confirmEnrolment(req, ctx) {
      const { member, session, recoveryCodes } = await o.people.confirm(
        emOf(ctx.values),
        portalOf(ctx).actor,
        req.token,
        req.code,
      );
      ctx.responseHeader.append("set-cookie", sessionCookie(session.token, o.publicUrl()));
      // Joining is the first sign-in (password and code, in this browser): the browser is the member's from now.
      ctx.responseHeader.append("set-cookie", deviceCookie(o.signin.deviceCookie(member), o.publicUrl()));
      return { member: toMember(member), recoveryCodes };
    },
    async signIn(req, ctx) {
      const portal = portalOf(ctx);
      const { member, session, device } = await o.signin.signIn(
        emOf(ctx.values),
        portal.actor,
        req.email,
        req.password,
        req.code,
        portal.device,
      );
      ctx.responseHeader.append("set-cookie", sessionCookie(session.token, o.publicUrl()));
      ctx.responseHeader.append("set-cookie", deviceCookie(device, o.publicUrl()));
      return { member: toMember(member) };
    },
    async signOut(_req, ctx) {
      const session = sessionOf(ctx);
      const em = emOf(ctx.values);
      await em.transactional(async (tx) => {
        await o.sessions.end(tx, session.id);
        await o.audit.record(tx, portalOf(ctx).actor, { partnerId: session.partnerId, action: "sign_out" });
      });
      ctx.responseHeader.set("set-cookie", clearedCookie(o.publicUrl()));
      return {};
    },
    async signOutEverywhere(_req, ctx) {
      const session = sessionOf(ctx);
      const ended = await emOf(ctx.values).transactional(async (tx) => {
        const n = await o.sessions.endAll(tx, session.memberId);
        await o.audit.record(tx, portalOf(ctx).actor, {
          partnerId: session.partnerId,
          action: "sign_out_everywhere",
        });
        return n;
      });
      ctx.responseHeader.set("set-cookie", clearedCookie(o.publicUrl()));
      return { sessionsEnded: ended };
    },
    async whoAmI(_req, ctx) {
      const s = sessionOf(ctx);
      return {
        member: { id: s.memberId, partnerId: s.partnerId, email: s.email, role: s.role },
        partnerName: s.partnerName,
        // Every role may use both environments; the role decides what it may do there.
        environments: [...environments],
        sessionExpiresAt: timestampFromDate(s.expiresAt),
      };
    },
  };
}
