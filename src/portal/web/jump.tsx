import { useEffect, useRef, useState } from "preact/hooks";
import { navigate } from "./router.ts";

/** Where each kind of id is shown: its page, by its prefix. */
const PAGES: Record<string, (id: string) => string> = {
  req: (id) => `/requests/${id}`,
  evt: (id) => `/events/${id}`,
  dsb: (id) => `/disbursements/${id}`,
  whk: (id) => `/webhooks/${id}`,
};

/** The first id of a kind the portal shows, anywhere in what was typed or pasted. */
export function pageOfId(text: string): string | undefined {
  const m = /\b(req|evt|dsb|whk)_[0-9A-HJKMNP-TV-Z]{26}\b/.exec(text);
  return m ? PAGES[m[1] as string]?.(m[0]) : undefined;
}

/**
 * "Go to an id", in the header: a request, event, disbursement or webhook id (or text holding one) goes to its
 * page. `/` or Ctrl-K puts the cursor in it from anywhere but a field.
 */
export function JumpTo() {
  const input = useRef<HTMLInputElement>(null);
  const [unknown, setUnknown] = useState(false);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const typing = e.target instanceof HTMLElement && e.target.closest("input, textarea, select");
      if ((e.key === "/" && !typing) || (e.key === "k" && (e.ctrlKey || e.metaKey))) {
        e.preventDefault();
        input.current?.focus();
      }
    };
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, []);
  return (
    <search>
      <form
        class="jump"
        onSubmit={(e) => {
          e.preventDefault();
          const page = pageOfId(input.current?.value ?? "");
          setUnknown(!page);
          if (page) {
            navigate(page);
            if (input.current) input.current.value = "";
          }
        }}
      >
        <label>
          Go to an id <span class="muted">(/ or Ctrl-K)</span>
          <input
            ref={input}
            name="q"
            placeholder="req_…, evt_…, dsb_…, whk_…"
            autoComplete="off"
            spellcheck={false}
            aria-invalid={unknown}
            aria-describedby={unknown ? "jump-error" : undefined}
          />
        </label>
        <button type="submit" class="secondary">
          Go
        </button>
        {unknown ? (
          <p id="jump-error" class="error" role="alert">
            No request, event, disbursement or webhook id in that.
          </p>
        ) : null}
      </form>
    </search>
  );
}
