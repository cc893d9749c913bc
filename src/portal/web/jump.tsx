import { useEffect, useRef, useState } from "preact/hooks";
import { ANY_ID, pathOfId } from "./ids.tsx";
import { navigate } from "./router.ts";

/** The page of the first id with one, anywhere in what was typed or pasted. */
export function pageOfId(text: string): string | undefined {
  const m = ANY_ID.exec(text);
  return m ? pathOfId(m[0]) : undefined;
}

/**
 * "Go to an id", in the bar: a request, event, disbursement, webhook, delivery, consent, consent link or user
 * id (or text holding one) goes to its page. `/` or Ctrl-K puts the cursor in it from anywhere but a field.
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
          <span class="visually-hidden">Go to an id (/ or Ctrl-K)</span>
          <input
            ref={input}
            name="q"
            placeholder="Go to an id (/)"
            aria-keyshortcuts="/ Control+K"
            type="search"
            autoComplete="off"
            spellcheck={false}
            onInput={() => setUnknown(false)}
            aria-invalid={unknown}
            aria-describedby={unknown ? "jump-error" : undefined}
          />
        </label>
        <button type="submit" class="secondary">
          Go
        </button>
        {unknown ? (
          <p id="jump-error" class="error" role="alert">
            No id of a request, event, disbursement, webhook, delivery, consent, link or user in that.
          </p>
        ) : null}
      </form>
    </search>
  );
}
