import { TransportProvider } from "@connectrpc/connect-query";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import type { ComponentChildren } from "preact";
import { useMemo, useState } from "preact/hooks";
import { type Environment, portalTransport, storedEnvironment, storeEnvironment } from "./api.ts";
import { DeliveriesPage } from "./pages/deliveries.tsx";
import { EventLookupPage } from "./pages/event-lookup.tsx";
import { SigningKeysPage } from "./pages/signing-keys.tsx";
import { WebhooksPage } from "./pages/webhooks.tsx";
import { BASE, onLinkClick, usePath } from "./router.ts";

const NAV: { path: string; label: string }[] = [
  { path: "/webhooks", label: "Webhooks" },
  { path: "/events", label: "Event lookup" },
  { path: "/signing-keys", label: "Signing keys" },
];

/** The portal: the environment switch, the navigation, and the page the address names. */
export function App() {
  const [env, setEnv] = useState<Environment>(storedEnvironment());
  const transport = useMemo(() => portalTransport(env), [env]);
  // One cache per environment: switching never shows one environment's answers under the other's banner.
  const queries = useMemo(
    () => new QueryClient({ defaultOptions: { queries: { retry: 1, refetchOnWindowFocus: false } } }),
    [env],
  );
  const path = usePath();
  return (
    <TransportProvider transport={transport}>
      <QueryClientProvider client={queries}>
        <Shell
          env={env}
          path={path}
          onEnv={(e) => {
            storeEnvironment(e);
            setEnv(e);
          }}
        >
          <Route path={path} />
        </Shell>
      </QueryClientProvider>
    </TransportProvider>
  );
}

function Route({ path }: { path: string }) {
  const webhook = /^\/webhooks\/(whk_[0-9A-Z]{26})$/.exec(path);
  if (webhook?.[1]) return <DeliveriesPage webhookId={webhook[1]} />;
  switch (path) {
    case "/":
    case "/webhooks":
      return <WebhooksPage />;
    case "/events":
      return <EventLookupPage />;
    case "/signing-keys":
      return <SigningKeysPage />;
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
  onEnv: (e: Environment) => void;
  children: ComponentChildren;
}) {
  const { env, path, onEnv, children } = props;
  return (
    <div class={`shell env-${env}`}>
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <header>
        <span class="brand">Partner portal</span>
        <fieldset class="env-switch">
          <legend>Environment</legend>
          {(["sandbox", "production"] as const).map((e) => (
            <label key={e}>
              <input type="radio" name="env" value={e} checked={env === e} onChange={() => onEnv(e)} />
              {e === "sandbox" ? "Sandbox" : "Production"}
            </label>
          ))}
        </fieldset>
      </header>
      {env === "sandbox" ? (
        <p class="sandbox-banner" role="note">
          Sandbox: test data only. Nothing here moves money or reaches a real person.
        </p>
      ) : null}
      <nav aria-label="Portal">
        <ul>
          {NAV.map((n) => (
            <li key={n.path}>
              <a
                href={`${BASE}${n.path}`}
                onClick={onLinkClick}
                aria-current={path === n.path || path.startsWith(`${n.path}/`) ? "page" : undefined}
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
