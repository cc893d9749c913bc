import { useMutation } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { PortalAuthService } from "../../../gen/portal/v1/auth_pb.ts";
import type { Member } from "../../../gen/portal/v1/members_pb.ts";
import type { Environment } from "./api.ts";
import { JumpTo } from "./jump.tsx";
import { BASE, onLinkClick } from "./router.ts";
import { setTimeZone, timeZoneChoices, useTimeZone } from "./time.tsx";

const NAV: { path: string; label: string }[] = [
  { path: "/", label: "Overview" },
  { path: "/requests", label: "Requests" },
  { path: "/events", label: "Events" },
  { path: "/webhooks", label: "Webhooks" },
  { path: "/consents", label: "Consents" },
  { path: "/disbursements", label: "Disbursements" },
  { path: "/api-keys", label: "API keys" },
  { path: "/signing-keys", label: "Signing keys" },
];

/** Who is signed in, for whom. */
export interface Signed {
  member: Member;
  partnerName: string;
}

/**
 * The app's frame: one compact bar (the partner's name, "Go to an id", the environment and the member's menu),
 * the navigation beside the page (a "Menu" button on a narrow screen), and the page.
 */
export function Shell(props: {
  env: Environment;
  path: string;
  me: Signed;
  onEnv: (e: Environment) => void;
  children: ComponentChildren;
}) {
  const { env, path, me, onEnv, children } = props;
  const [menu, setMenu] = useState(false);
  // A link followed on a narrow screen closes the menu it was chosen from.
  useEffect(() => setMenu(false), [path]);
  // Escape closes an open menu (the navigation's or the member's) and gives focus back to what opened it.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "Escape") return;
      const open = document.querySelector<HTMLDetailsElement>(".member-menu[open]");
      if (open) {
        open.open = false;
        open.querySelector("summary")?.focus();
      } else if (document.getElementById("portal-nav")?.classList.contains("open")) {
        setMenu(false);
        document.querySelector<HTMLElement>(".menu-button")?.focus();
      }
    };
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, []);
  return (
    <div class={`shell env-${env}`}>
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <header class="bar">
        <button
          type="button"
          class="secondary menu-button"
          aria-expanded={menu}
          aria-controls="portal-nav"
          onClick={() => setMenu(!menu)}
        >
          Menu
        </button>
        <span class="brand" title={me.partnerName}>
          {me.partnerName || "Partner portal"}
        </span>
        <JumpTo />
        <label class="env-select">
          <span class="visually-hidden">Environment</span>
          <select name="env" value={env} onChange={(e) => onEnv(e.currentTarget.value as Environment)}>
            <option value="sandbox">Sandbox</option>
            <option value="production">Production</option>
          </select>
        </label>
        <MemberMenu me={me.member} />
        {env === "sandbox" ? (
          <p class="sandbox-banner" role="note">
            Sandbox: test data only<span class="wide-only">; nothing moves money or reaches a person</span>.
          </p>
        ) : null}
      </header>
      <div class="layout">
        <nav id="portal-nav" aria-label="Portal" class={menu ? "sidebar open" : "sidebar"}>
          <ul>
            {navFor(env, me.member).map((n) => (
              <li key={n.path}>
                <a href={`${BASE}${n.path}`} onClick={onLinkClick} aria-current={current(path, n.path)}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          {children}
        </main>
      </div>
    </div>
  );
}

function navFor(env: Environment, me: Member) {
  return [
    ...NAV,
    ...(env === "sandbox" ? [{ path: "/sandbox", label: "Sandbox tools" }] : []),
    ...(me.role === "admin" ? [{ path: "/team", label: "Team" }] : []),
  ];
}

/** Whether a navigation entry is the page shown, or the list a detail page shown belongs to. */
function current(path: string, entry: string): "page" | undefined {
  return path === entry || (entry !== "/" && path.startsWith(`${entry}/`)) ? "page" : undefined;
}

/** The member's menu: who they are, the time zone times are shown in, and signing out. */
function MemberMenu({ me }: { me: Member }) {
  const client = useQueryClient();
  // Reset, not refetch: no answer or error of the session that ended stays on screen.
  const done = { onSuccess: () => void client.resetQueries() };
  const signOut = useMutation(PortalAuthService.method.signOut, done);
  const everywhere = useMutation(PortalAuthService.method.signOutEverywhere, done);
  const zone = useTimeZone();
  return (
    <details class="member-menu">
      <summary>
        <span class="visually-hidden">Account: </span>
        <span class="initial" aria-hidden="true">
          {me.email.slice(0, 1).toUpperCase()}
        </span>
        <span class="who">{me.email}</span>
      </summary>
      <div class="menu-pop">
        <p>
          {me.email} <span class="muted">({me.role})</span>
        </p>
        <label>
          Show times in
          <select value={zone} onChange={(e) => setTimeZone(e.currentTarget.value)}>
            {timeZoneChoices().map((z) => (
              <option key={z}>{z}</option>
            ))}
          </select>
        </label>
        <button type="button" class="secondary" onClick={() => signOut.mutate({})}>
          Sign out
        </button>
        <button type="button" class="secondary" onClick={() => everywhere.mutate({})}>
          Sign out everywhere
        </button>
      </div>
    </details>
  );
}
