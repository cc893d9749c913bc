import { useInfiniteQuery, useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useState } from "preact/hooks";
import type { Member } from "../../../../gen/portal/v1/members_pb.ts";
import { TeamService } from "../../../../gen/portal/v1/team_pb.ts";
import { CopyButton, ErrorBox, Loading, LoadMore, Page, TableWrap, Time } from "../ui.tsx";

const ROLES = ["admin", "developer", "viewer"] as const;

/** Admins: the team (invite, change a role, remove) and the audit log of every portal action. */
export function TeamPage({ me }: { me: Member }) {
  const client = useQueryClient();
  const members = useQuery(TeamService.method.listMembers, {});
  const audit = useInfiniteQuery(
    TeamService.method.listAuditEvents,
    { limit: 50, startingAfter: "" },
    {
      pageParamKey: "startingAfter",
      getNextPageParam: (last) => (last.hasMore ? last.events.at(-1)?.id : undefined),
    },
  );
  const invite = useMutation(TeamService.method.inviteMember, {
    onSuccess: () => void client.invalidateQueries(),
  });
  const [role, setRole] = useState<string>("developer");
  return (
    <Page title="Team">
      <form
        class="panel"
        onSubmit={(e) => {
          e.preventDefault();
          invite.mutate({ email: String(new FormData(e.currentTarget).get("email") ?? ""), role });
        }}
      >
        <h2>Invite someone</h2>
        <label>
          Email
          <input name="email" type="email" required />
        </label>
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.currentTarget.value)}>
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
        <ErrorBox error={invite.error} />
        <button type="submit" disabled={invite.isPending}>
          Invite
        </button>
        {invite.data ? (
          <p role="status">
            Send this link to {invite.data.invite?.email}; it works once, for 72 hours:{" "}
            <code class="secret">{invite.data.inviteUrl}</code> <CopyButton value={invite.data.inviteUrl} />
          </p>
        ) : null}
      </form>
      <h2>Members</h2>
      {members.isPending ? <Loading /> : null}
      <ErrorBox error={members.error} />
      <ul class="cards">
        {members.data?.members.map((m) => (
          <MemberCard
            key={m.id}
            member={m}
            self={m.id === me.id}
            onlyAdmin={
              m.role === "admin" && members.data.members.filter((x) => x.role === "admin").length === 1
            }
          />
        ))}
      </ul>
      <h2>Audit log</h2>
      <ErrorBox error={audit.error} />
      <TableWrap label="Audit log">
        <table class="dense">
          <caption class="visually-hidden">Audit log</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Who</th>
              <th scope="col">What</th>
              <th scope="col">Outcome</th>
              <th scope="col">From</th>
            </tr>
          </thead>
          <tbody>
            {audit.data?.pages
              .flatMap((p) => p.events)
              .map((a) => (
                <tr key={a.id}>
                  <td>
                    <Time at={a.createdAt} relative />
                  </td>
                  <td>{a.actorEmail || a.actor}</td>
                  <td>
                    <code>{a.action}</code> {a.detail ? <code>{a.detail}</code> : null}{" "}
                    {a.target ? <code class="muted">{a.target}</code> : null}
                    {a.environment ? <span class="muted"> ({a.environment})</span> : null}
                  </td>
                  <td>{a.outcome}</td>
                  <td>
                    {a.clientAddress}{" "}
                    <span class="muted clip" title={a.userAgent}>
                      {a.userAgent}
                    </span>
                  </td>
                </tr>
              ))}
          </tbody>
        </table>
      </TableWrap>
      <LoadMore list={audit} />
    </Page>
  );
}

/**
 * A member, their role and a way to remove them; the only admin keeps their role and place (the service refuses
 * to leave a team without one), so neither is offered.
 */
function MemberCard({ member: m, self, onlyAdmin }: { member: Member; self: boolean; onlyAdmin: boolean }) {
  const client = useQueryClient();
  const done = { onSuccess: () => void client.invalidateQueries() };
  const change = useMutation(TeamService.method.changeRole, done);
  const remove = useMutation(TeamService.method.removeMember, done);
  return (
    <li class="card">
      <h3>
        {m.email} {self ? <span class="muted">(you)</span> : null}
      </h3>
      <label>
        Role
        <select
          value={m.role}
          disabled={change.isPending || onlyAdmin}
          onChange={(e) => change.mutate({ memberId: m.id, role: e.currentTarget.value })}
        >
          {ROLES.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
      </label>
      {onlyAdmin ? (
        <p class="muted">The only admin: make another member an admin before changing this one.</p>
      ) : (
        <button
          type="button"
          class="danger"
          disabled={remove.isPending}
          onClick={() =>
            confirm(`Remove ${m.email}? Their sessions end at once.`) && remove.mutate({ memberId: m.id })
          }
        >
          Remove
        </button>
      )}
      <ErrorBox error={change.error ?? remove.error} />
    </li>
  );
}
