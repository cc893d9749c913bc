/** The roles of a partner's people (docs/portal.md "People, sign-in and sessions"). */
export const roles = ["admin", "developer", "viewer"] as const;

/** A member's role: `admin` (everything and the team), `developer` (the partner API), `viewer` (reads only). */
export type Role = (typeof roles)[number];

/** True when `value` is a role. */
export function isRole(value: string): value is Role {
  return (roles as readonly string[]).includes(value);
}
