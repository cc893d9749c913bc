import { Code, ConnectError } from "@connectrpc/connect";
import { TransportProvider, useMutation, useQuery } from "@connectrpc/connect-query";
import { QueryCache, QueryClient, QueryClientProvider, useQueryClient } from "@tanstack/react-query";
import type { ComponentChildren } from "preact";
import { useMemo, useState } from "preact/hooks";
import { PortalAuthService } from "../../../gen/portal/v1/auth_pb.ts";
import type { Member } from "../../../gen/portal/v1/members_pb.ts";
import { type Environment, portalTransport, storedEnvironment, storeEnvironment } from "./api.ts";
import { JumpTo } from "./jump.tsx";
import { ApiKeysPage } from "./pages/api-keys.tsx";
import { ConsentsPage } from "./pages/consents.tsx";
import { DeliveriesPage } from "./pages/deliveries.tsx";
import { DisbursementPage, DisbursementsPage } from "./pages/disbursements.tsx";
import { EventLookupPage } from "./pages/event-lookup.tsx";
import { InvitePage } from "./pages/invite.tsx";
import { OverviewPage } from "./pages/overview.tsx";
import { RequestPage, RequestsPage } from "./pages/requests.tsx";
import { SandboxPage } from "./pages/sandbox.tsx";
import { SignInPage } from "./pages/sign-in.tsx";
import { SigningKeysPage } from "./pages/signing-keys.tsx";
import { TeamPage } from "./pages/team.tsx";
import { WebhooksPage } from "./pages/webhooks.tsx";
import { BASE, onLinkClick, usePath } from "./router.ts";
import { ErrorBox, Loading } from "./ui.tsx";

const NAV: { path: string; label: string }[] = [
  { path: "/", label: "Overview" },
  { path: "/api-keys", label: "API keys" },
  { path: "/webhooks", label: "Webhooks" },
  { path: "/consents", label: "Consents" },
  { path: "/disbursements", label: "Disbursements" },
  { path: "/events", label: "Event lookup" },
  { path: "/requests", label: "Requests" },
  { path: "/signing-keys", label: "Signing keys" },
];

/** The portal: the environment switch, the navigation, and the page the address names. */
export function App() {
  const [env, setEnv] = useState<Environment>(storedEnvironment());
  const transport = useMemo(() => portalTransport(env), [env]);
  // One cache per environment: switching never shows one environment's answers under the other's banner.
  const queries = useMemo(() => {
    const client: QueryClient = new QueryClient({
      defaultOptions: { queries: { retry: false, refetchOnWindowFocus: false } },
      // A session that ended (idle, signed out elsewhere, removed) sends the person back to sign in.
      queryCache: new QueryCache({
        onError: (err, query) => {
          const key = query.queryKey[1] as { serviceName?: string } | undefined;
          if (key?.serviceName === PortalAuthService.typeName) return;
          if (ConnectError.from(err).code === Code.Unauthenticated)
            void client.invalidateQueries({
              queryKey: ["connect-query", { serviceName: PortalAuthService.typeName }],
            });
        },
      }),
    });
    return client;
  }, [env]);
  const path = usePath();
  return (
    <TransportProvider transport={transport}>
      <QueryClientProvider client={queries}>
        {path === "/invite" ? (
          <Bare>
            <InvitePage />
          </Bare>
        ) : (
          <Signed>
            {(me) => (
              <Shell
                env={env}
                path={path}
                me={me}
                onEnv={(e) => {
                  storeEnvironment(e);
                  setEnv(e);
                }}
              >
                <Route path={path} me={me} env={env} />
              </Shell>
            )}
          </Signed>
        )}
      </QueryClientProvider>
    </TransportProvider>
  );
}

/** A page shown before there is a session: the same frame, without navigation. */
function Bare({ children }: { children: ComponentChildren }) {
  return (
    <div class="shell">
      <header>
        <span class="brand">Partner portal</span>
      </header>
      <main id="main">{children}</main>
    </div>
  );
}

/** Who is signed in: the page for them, or the sign-in form. */
function Signed({ children }: { children: (me: Member) => ComponentChildren }) {
  const who = useQuery(PortalAuthService.method.whoAmI, {});
  if (who.isPending) return <Loading />;
  if (who.error && ConnectError.from(who.error).code === Code.Unauthenticated)
    return (
      <Bare>
        <SignInPage />
      </Bare>
    );
  if (who.error || !who.data.member) return <ErrorBox error={who.error} />;
  return <>{children(who.data.member)}</>;
}

function Route({ path, me, env }: { path: string; me: Member; env: Environment }) {
  const webhook = /^\/webhooks\/(whk_[0-9A-Z]{26})$/.exec(path);
  if (webhook?.[1]) return <DeliveriesPage webhookId={webhook[1]} />;
  const request = /^\/requests\/(req_[0-9A-HJKMNP-TV-Z]{26})$/.exec(path);
  if (request?.[1]) return <RequestPage id={request[1]} />;
  const event = /^\/events\/(evt_[0-9A-HJKMNP-TV-Z]{26})$/.exec(path);
  if (event?.[1]) return <EventLookupPage key={event[1]} initial={event[1]} />;
  const disbursement = /^\/disbursements\/(dsb_[0-9A-HJKMNP-TV-Z]{26})$/.exec(path);
  if (disbursement?.[1]) return <DisbursementPage id={disbursement[1]} />;
  switch (path) {
    case "/":
      return <OverviewPage env={env} />;
    case "/webhooks":
      return <WebhooksPage />;
    case "/events":
      return <EventLookupPage />;
    case "/requests":
      return <RequestsPage />;
    case "/api-keys":
      return <ApiKeysPage me={me} env={env} />;
    case "/consents":
      return <ConsentsPage />;
    case "/disbursements":
      return <DisbursementsPage />;
    case "/sandbox":
      return env === "sandbox" ? (
        <SandboxPage />
      ) : (
        <p>The sandbox tools work in the sandbox only: switch above.</p>
      );
    case "/signing-keys":
      return <SigningKeysPage />;
    case "/team":
      return me.role === "admin" ? <TeamPage me={me} /> : <p>Only admins manage the team.</p>;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            There is no such page. <a href={`${BASE}/`}>Go to the start.</a>
          </p>
        </section>
      );
  }
}

function Shell(props: {
  env: Environment;
  path: string;
  me: Member;
  onEnv: (e: Environment) => void;
  children: ComponentChildren;
}) {
  const { env, path, me, onEnv, children } = props;
  const nav = [
    ...NAV,
    ...(env === "sandbox" ? [{ path: "/sandbox", label: "Sandbox tools" }] : []),
    ...(me.role === "admin" ? [{ path: "/team", label: "Team" }] : []),
  ];
  return (
    <div class={`shell env-${env}`}>
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <header>
        <span class="brand">Partner portal</span>
        <Account me={me} />
        <JumpTo />
        <fieldset class="env-switch">
          <legend>Environment</legend>
          {(["sandbox", "production"] as const).map((e) => (
            <label key={e}>
              <input type="radio" name="env" value={e} checked={env === e} onChange={() => onEnv(e)} />
              {e === "sandbox" ? "Sandbox" : "Production"}
            </label>
          ))}
        </fieldset>
        {env === "sandbox" ? (
          <p class="sandbox-banner" role="note">
            Sandbox: test data only. Nothing here moves money or reaches a real person.
          </p>
        ) : null}
      </header>
      <nav aria-label="Portal">
        <ul>
          {nav.map((n) => (
            <li key={n.path}>
              <a
                href={`${BASE}${n.path}`}
                onClick={onLinkClick}
                aria-current={
                  path === n.path || (n.path !== "/" && path.startsWith(`${n.path}/`)) ? "page" : undefined
                }
              >
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
  );
}

function Account({ me }: { me: Member }) {
  const client = useQueryClient();
  // Reset, not refetch: no answer or error of the session that ended stays on screen.
  const done = { onSuccess: () => void client.resetQueries() };
  const signOut = useMutation(PortalAuthService.method.signOut, done);
  const everywhere = useMutation(PortalAuthService.method.signOutEverywhere, done);
  return (
    <div class="account">
      <span>
        {me.email} <span class="muted">({me.role})</span>
      </span>
      <button type="button" class="secondary" onClick={() => signOut.mutate({})}>
        Sign out
      </button>
      <button type="button" class="secondary" onClick={() => everywhere.mutate({})}>
        Sign out everywhere
      </button>
    </div>
  );
}
