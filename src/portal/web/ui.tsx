import type { DescEnum } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { BASE, onLinkClick } from "./router.ts";

/**
 * The API's reasons per field of a refused request (`details.fields` of `validation_failed`, as REST answers
 * it: `{ "url": "does not resolve" }`), from the error's ErrorInfo.
 */
export function fieldErrors(error: unknown): Record<string, string> {
  if (!error) return {};
  const raw = ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.metadata.details;
  try {
    const fields = raw ? (JSON.parse(raw) as { fields?: unknown }).fields : undefined;
    return fields && typeof fields === "object" ? (fields as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/** The id of the message of a form's field `name`, for its input's `aria-describedby`. */
export const fieldErrorId = (form: string, name: string) => `${form}-${name}-error`;

/** What the API said of one field, beside it (nothing when it said nothing of it). */
export function FieldError(props: { error: unknown; form: string; name: string }) {
  const reason = fieldErrors(props.error)[props.name];
  if (!reason) return null;
  return (
    <span id={fieldErrorId(props.form, props.name)} class="error field-error">
      {reason}
    </span>
  );
}

/**
 * An error from the API, in the words its message gives, with its code for support; a refused field's reason
 * is said beside the field ({@link FieldError}) and listed here too, for those the form does not show.
 */
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const e = ConnectError.from(error);
  const fields = Object.entries(fieldErrors(error));
  return (
    <div class="error" role="alert">
      <p>
        {e.rawMessage} <span class="muted">({codeName(e)})</span>
      </p>
      {fields.length ? (
        <ul>
          {fields.map(([name, reason]) => (
            <li key={name}>
              <code>{name}</code>: {reason}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** The contract's own code (the ErrorInfo reason), or the Connect code's name. */
function codeName(e: ConnectError): string {
  return e.findDetails(ErrorInfoSchema)[0]?.reason ?? Code[e.code];
}

/** A polite "loading" for screen readers and sighted people alike. */
export function Loading() {
  return (
    <p class="muted" aria-live="polite">
      Loading…
    </p>
  );
}

export { Time, zonedTime } from "./time.tsx";

/** Copies a value to the clipboard and says so; `name` says what it copies to a screen reader. */
export function CopyButton(props: { value: string; label?: string; name?: string; small?: boolean }) {
  const { value, label = "Copy", name, small } = props;
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class={small ? "secondary copy" : "secondary"}
      aria-label={name ? `${done ? "Copied" : label} ${name}` : undefined}
      onClick={() =>
        void navigator.clipboard.writeText(value).then(
          () => setDone(true),
          () => setDone(false),
        )
      }
    >
      {done ? "Copied" : label}
    </button>
  );
}

/**
 * A table's box, which scrolls sideways on a narrow screen: focusable and named, so a keyboard can scroll it
 * and a screen reader says what it is.
 */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must take focus to scroll by keyboard.
    <section class="table-wrap" aria-label={`${label} table`} tabIndex={0}>
      {children}
    </section>
  );
}

/** A set of checkboxes under a legend: which of `options` are chosen. */
export function CheckboxSet<T extends string | number>(props: {
  legend: string;
  options: readonly T[];
  chosen: readonly T[];
  onChange: (chosen: T[]) => void;
  label: (option: T) => ComponentChildren;
}) {
  const { legend, options, chosen, onChange, label } = props;
  return (
    <fieldset>
      <legend>{legend}</legend>
      {options.map((o) => (
        <label class="check" key={o}>
          <input
            type="checkbox"
            checked={chosen.includes(o)}
            onChange={(e) =>
              onChange(e.currentTarget.checked ? [...chosen, o] : chosen.filter((x) => x !== o))
            }
          />
          {label(o)}
        </label>
      ))}
    </fieldset>
  );
}

/** "Load more" under a list read a page at a time; nothing when the last page is in. */
export function LoadMore(props: {
  list: { hasNextPage: boolean; isFetchingNextPage: boolean; fetchNextPage: () => unknown };
}) {
  const { list } = props;
  if (!list.hasNextPage) return null;
  return (
    <button
      type="button"
      class="secondary"
      disabled={list.isFetchingNextPage}
      onClick={() => void list.fetchNextPage()}
    >
      {list.isFetchingNextPage ? "Loading…" : "Load more"}
    </button>
  );
}

/** A secret shown once: the person is told it will not be shown again. */
export function ShownOnce({ title, value }: { title: string; value: string }) {
  return (
    <div class="shown-once" role="status">
      <p>
        <strong>{title}</strong> It is shown only now: copy it somewhere safe.
      </p>
      <code class="secret">{value}</code> <CopyButton value={value} />
    </div>
  );
}

/** A step of a detail page's breadcrumbs: the list it belongs to. */
export interface Crumb {
  label: string;
  path: string;
}

/**
 * A page's heading and body; the browser's tab says which page it is. A detail page names the lists above it
 * (`crumbs`), linked, before its own title.
 */
export function Page(props: { title: string; id?: string; crumbs?: Crumb[]; children: ComponentChildren }) {
  const { title, id, crumbs, children } = props;
  useEffect(() => {
    document.title = `${id ? `${title} ${id}` : title} · Partner portal`;
  }, [title, id]);
  return (
    <section aria-labelledby="page-title">
      {crumbs?.length ? (
        <nav aria-label="Breadcrumb">
          <ol class="crumbs">
            {crumbs.map((c) => (
              <li key={c.path}>
                <a href={`${BASE}${c.path}`} onClick={onLinkClick}>
                  {c.label}
                </a>
              </li>
            ))}
            <li aria-current="page">{title}</li>
          </ol>
        </nav>
      ) : null}
      <h1 id="page-title">{title}</h1>
      {id ? (
        <p class="object-id">
          <code>{id}</code> <CopyButton value={id} name={id} small />
        </p>
      ) : null}
      {children}
    </section>
  );
}

/** A badge for a status: green when done well, red when it failed, amber while it waits. */
export function StatusBadge({ status }: { status: string }) {
  const tone = GOOD.has(status) ? "good" : BAD.has(status) ? "bad" : WAIT.has(status) ? "warn" : "none";
  return <span class={`badge ${tone}`}>{status}</span>;
}
const GOOD = new Set(["ACTIVE", "DELIVERED", "ACCEPTED", "COLLECTED", "REFUNDED", "SUCCEEDED"]);
const BAD = new Set(["FAILED", "GIVEN_UP", "REVERSED", "REVOKED", "DECLINED", "LOCKED", "DISABLED"]);
const WAIT = new Set(["PENDING", "PROCESSING", "AWAITING_ACCEPTANCE", "SCHEDULED", "PAUSED"]);

/** An enum value's name as the contract spells it (`DELIVERED`), from the generated enum's descriptor. */
export function enumName(schema: DescEnum, value: number): string {
  return schema.value[value]?.name ?? String(value);
}

/** A one-field form that looks something up by its prefixed id (`prefix_` and 26 ULID characters). */
export function IdLookup(props: { label: string; prefix: string; onId: (id: string) => void }) {
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        props.onId(String(new FormData(e.currentTarget).get("id") ?? "").trim());
      }}
    >
      <label>
        {props.label}
        <input
          name="id"
          required
          pattern={`${props.prefix}_[0-9A-HJKMNP-TV-Z]{26}`}
          title={`${props.prefix}_ followed by 26 letters and digits`}
          placeholder={`${props.prefix}_…`}
          autoComplete="off"
          spellcheck={false}
        />
      </label>
      <button type="submit">Look up</button>
    </form>
  );
}
