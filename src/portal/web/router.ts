import { useEffect, useState } from "preact/hooks";

/** The portal's pages live under /portal; the server answers every such path with the same shell. */
export const BASE = "/portal";

/** The path inside the portal ("/webhooks/whk_…"), kept in step with the address bar. */
export function usePath(): string {
  const [path, setPath] = useState(current());
  useEffect(() => {
    const onPop = () => setPath(current());
    addEventListener("popstate", onPop);
    addEventListener("portal:navigate", onPop);
    return () => {
      removeEventListener("popstate", onPop);
      removeEventListener("portal:navigate", onPop);
    };
  }, []);
  return path;
}

function current(): string {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : "/";
  return p === "" ? "/" : p;
}

/** Goes to a portal path without reloading the page. */
export function navigate(path: string): void {
  history.pushState(null, "", `${BASE}${path}${location.search}`);
  dispatchEvent(new Event("portal:navigate"));
}

/** A link inside the portal: a real `<a href>` (so it opens in a new tab too) that navigates in place. */
export function onLinkClick(e: MouseEvent): void {
  const a = (e.currentTarget as HTMLAnchorElement | null) ?? undefined;
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.pathname.slice(BASE.length) || "/");
}
