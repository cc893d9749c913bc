import type { Clock } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import { PortalAuditEventEntity, type PortalAuditEventRow } from "./audit-event.entity.ts";

/** Who acts, and from where: what every audit event records of its actor. */
export interface Actor {
  /** `mbr_` id, `operator`, or '' when nobody is signed in (a failed sign-in). */
  id: string;
  email: string;
  /** The client's address as the service saw it. */
  address: string;
  userAgent: string;
}

/** The operator, acting through the internal API (no address of a person to keep). */
export const operatorActor: Actor = { id: "operator", email: "", address: "", userAgent: "" };

/** The actions the audit log records (docs/portal.md). */
export type AuditAction =
  | "sign_in"
  | "sign_in_failed"
  | "sign_out"
  | "sign_out_everywhere"
  | "enrolled"
  | "member_invited"
  | "role_changed"
  | "member_removed"
  | "recovery_code_used"
  | "api_call";

/** One event to record. */
export interface AuditEntry {
  partnerId: string;
  action: AuditAction;
  target?: string;
  /** `ok`, or the error code it ended with. */
  outcome?: string;
  environment?: string;
  detail?: string;
}

/** An audit event as read back, the evidence opened. */
export interface AuditView extends PortalAuditEventRow {
  clientAddress: string;
  userAgent: string;
}

/** Binds an audit event's sealed evidence (address, user agent) to the event. */
export const auditEvidenceAad = (id: string) => `portal-audit:${id}`;
const DEFAULT_PAGE = 20;
const MAX_PAGE = 100;

/** What {@link createAuditService} returns. */
export type AuditService = ReturnType<typeof createAuditService>;

/** The portal's audit log: written in the transaction of the change it records, read by admins and operators. */
export function createAuditService({ clock, box }: { clock: Clock; box: SecretBox }) {
  return {
    /** Records an event on `em` (inside the caller's transaction, when it is in one). */
    async record(em: Em, actor: Actor, entry: AuditEntry): Promise<void> {
      const id = newId("aud");
      const evidence = JSON.stringify({ address: actor.address, userAgent: actor.userAgent.slice(0, 256) });
      em.persist(
        em.create(PortalAuditEventEntity, {
          id,
          partnerId: entry.partnerId,
          actor: actor.id,
          actorEmail: actor.email,
          action: entry.action,
          target: entry.target ?? "",
          outcome: entry.outcome ?? "ok",
          environment: entry.environment ?? "",
          detail: entry.detail ?? "",
          evidenceEnc: box.seal(Buffer.from(evidence), auditEvidenceAad(id)),
          createdAt: clock.now(),
        }),
      );
      await em.flush();
    },

    /** A partner's events, newest first: at most `limit` (1–100, 20 when 0) after `startingAfter`. */
    async list(em: Em, partnerId: string, limit: number, startingAfter: string) {
      if (!Number.isInteger(limit) || limit < 0 || limit > MAX_PAGE)
        throw new ApiError("invalid_argument", `limit must be from 1 to ${MAX_PAGE}.`);
      if (startingAfter && !isId("aud", startingAfter))
        throw new ApiError("invalid_argument", "starting_after must be an aud_ id from the previous page.");
      const size = limit || DEFAULT_PAGE;
      const rows = await em.find(
        PortalAuditEventEntity,
        { partnerId, ...(startingAfter ? { id: { $lt: startingAfter } } : {}) },
        { orderBy: { id: "desc" }, limit: size + 1 },
      );
      const events: AuditView[] = rows.slice(0, size).map((row) => {
        const { address, userAgent } = JSON.parse(
          box.open(row.evidenceEnc, auditEvidenceAad(row.id)).toString(),
        ) as {
          address: string;
          userAgent: string;
        };
        return { ...row, clientAddress: address, userAgent };
      });
      return { events, hasMore: rows.length > size };
    },
  };
}
