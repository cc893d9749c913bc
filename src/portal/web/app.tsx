import { Code, ConnectError } from "@connectrpc/connect";
import { TransportProvider, useQuery } from "@connectrpc/connect-query";
import { QueryCache, QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { type ComponentChildren, Fragment } from "preact";
import { useMemo, useState } from "preact/hooks";
import { PortalAuthService } from "../../../gen/portal/v1/auth_pb.ts";
import type { Member } from "../../../gen/portal/v1/members_pb.ts";
import {
  CanWriteContext,
  type Environment,
  EnvironmentContext,
  portalTransport,
  storedEnvironment,
  storeEnvironment,
} from "./api.ts";
import { ApiKeysPage } from "./pages/api-keys.tsx";
import { ConsentLinkPage, ConsentPage } from "./pages/consent.tsx";
import { ConsentsPage } from "./pages/consents.tsx";
import { DeliveriesPage } from "./pages/deliveries.tsx";
import { DeliveryPage } from "./pages/delivery.tsx";
import { DisbursementPage } from "./pages/disbursement.tsx";
import { DisbursementsPage } from "./pages/disbursements.tsx";
import { EventPage, EventsPage } from "./pages/events.tsx";
import { InvitePage } from "./pages/invite.tsx";
import { OverviewPage } from "./pages/overview.tsx";
import { RequestPage, RequestsPage } from "./pages/requests.tsx";
import { SandboxPage } from "./pages/sandbox.tsx";
import { SignInPage } from "./pages/sign-in.tsx";
import { SigningKeysPage } from "./pages/signing-keys.tsx";
import { TeamPage } from "./pages/team.tsx";
import { UserPage } from "./pages/user.tsx";
import { WebhooksPage } from "./pages/webhooks.tsx";
import { BASE, usePath } from "./router.ts";
import { Shell, type Signed } from "./shell.tsx";
import { ErrorBox, Loading } from "./ui.tsx";

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
    <EnvironmentContext.Provider value={env}>
      <TransportProvider transport={transport}>
        <QueryClientProvider client={queries}>
          {path === "/invite" ? (
            <Bare>
              <InvitePage />
            </Bare>
          ) : (
            <SignedIn>
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
                  <CanWriteContext.Provider value={me.member.role !== "viewer"}>
                    <Route path={path} me={me.member} env={env} />
                  </CanWriteContext.Provider>
                </Shell>
              )}
            </SignedIn>
          )}
        </QueryClientProvider>
      </TransportProvider>
    </EnvironmentContext.Provider>
  );
}

/** A page shown before there is a session: the same frame, without navigation. */
function Bare({ children }: { children: ComponentChildren }) {
  return (
    <div class="shell">
      <header class="bar">
        <span class="brand">Partner portal</span>
      </header>
      <main id="main">{children}</main>
    </div>
  );
}

/** Who is signed in: the page for them, or the sign-in form. */
function SignedIn({ children }: { children: (me: Signed) => ComponentChildren }) {
  const who = useQuery(PortalAuthService.method.whoAmI, {});
  if (who.isPending) return <Loading />;
  if (who.error && ConnectError.from(who.error).code === Code.Unauthenticated)
    return (
      <Bare>
        <SignInPage />
      </Bare>
    );
  if (who.error || !who.data.member) return <ErrorBox error={who.error} />;
  return <>{children({ member: who.data.member, partnerName: who.data.partnerName })}</>;
}

/** The detail pages, by the id in the address. */
const DETAILS: [RegExp, (id: string) => ComponentChildren][] = [
  [/^\/webhooks\/(whk_[0-9A-HJKMNP-TV-Z]{26})$/, (id) => <DeliveriesPage webhookId={id} />],
  [/^\/requests\/(req_[0-9A-HJKMNP-TV-Z]{26})$/, (id) => <RequestPage id={id} />],
  [/^\/events\/(evt_[0-9A-HJKMNP-TV-Z]{26})$/, (id) => <EventPage id={id} />],
  [/^\/disbursements\/(dsb_[0-9A-HJKMNP-TV-Z]{26})$/, (id) => <DisbursementPage id={id} />],
  [/^\/deliveries\/(dlv_[0-9A-HJKMNP-TV-Z]{26})$/, (id) => <DeliveryPage id={id} />],
  [/^\/consents\/(cns_[0-9A-HJKMNP-TV-Z]{26})$/, (id) => <ConsentPage id={id} />],
  [/^\/consent-links\/(cnl_[0-9A-HJKMNP-TV-Z]{26})$/, (id) => <ConsentLinkPage id={id} />],
  [/^\/users\/(usr_[0-9A-Za-z]{1,64})$/, (id) => <UserPage id={id} />],
];

function Route({ path, me, env }: { path: string; me: Member; env: Environment }) {
  for (const [shape, page] of DETAILS) {
    const id = shape.exec(path)?.[1];
    // Keyed by id: going from one object's page to another's starts afresh.
    if (id) return <Fragment key={id}>{page(id)}</Fragment>;
  }
  switch (path) {
    case "/":
      return <OverviewPage env={env} />;
    case "/webhooks":
      return <WebhooksPage />;
    case "/events":
      return <EventsPage />;
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
