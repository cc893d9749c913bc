import { BASE, onLinkClick } from "./router.ts";
import { CopyButton } from "./ui.tsx";

const ULID = "[0-9A-HJKMNP-TV-Z]{26}";

/** Each kind of id that has a page, by its prefix, and the page's path. */
const PAGES: [RegExp, (id: string) => string][] = [
  [new RegExp(`^req_${ULID}$`), (id) => `/requests/${id}`],
  [new RegExp(`^evt_${ULID}$`), (id) => `/events/${id}`],
  [new RegExp(`^dsb_${ULID}$`), (id) => `/disbursements/${id}`],
  [new RegExp(`^whk_${ULID}$`), (id) => `/webhooks/${id}`],
  [new RegExp(`^dlv_${ULID}$`), (id) => `/deliveries/${id}`],
  [new RegExp(`^cns_${ULID}$`), (id) => `/consents/${id}`],
  [new RegExp(`^cnl_${ULID}$`), (id) => `/consent-links/${id}`],
  [/^usr_[0-9A-Za-z]{1,64}$/, (id) => `/users/${id}`],
];

/** The portal page of an id (`/disbursements/dsb_…`), or undefined for an id without one. */
export function pathOfId(id: string): string | undefined {
  return PAGES.find(([shape]) => shape.test(id))?.[1](id);
}

/** Any id with a page, anywhere in text that was typed or pasted (a log line, a JSON body, a URL). */
export const ANY_ID = new RegExp(`\\b(?:(?:req|evt|dsb|whk|dlv|cns|cnl)_${ULID}|usr_[0-9A-Za-z]{1,64})\\b`);

/** An id as lists show it: its prefix, then its first and last four characters (`dsb_01JD…X7Q2`). */
export function shortId(id: string): string {
  const cut = id.indexOf("_") + 1;
  const rest = id.slice(cut);
  return rest.length <= 12 ? id : `${id.slice(0, cut)}${rest.slice(0, 4)}…${rest.slice(-4)}`;
}

/**
 * An id, shortened, linking to its page (the whole id on hover and to screen readers), with a button that
 * copies the whole id. `full` shows it whole, as a detail page's own id.
 */
export function IdLink({ id, full, copy = true }: { id: string; full?: boolean; copy?: boolean }) {
  if (!id) return <span class="muted">—</span>;
  const path = pathOfId(id);
  const text = full ? id : shortId(id);
  return (
    <span class="id">
      {path ? (
        <a href={`${BASE}${path}`} onClick={onLinkClick} title={id} class="id-link">
          <code aria-hidden="true">{text}</code>
          <span class="visually-hidden">{id}</span>
        </a>
      ) : (
        <code title={id}>{text}</code>
      )}
      {copy ? <CopyButton value={id} label="Copy" name={id} small /> : null}
    </span>
  );
}
