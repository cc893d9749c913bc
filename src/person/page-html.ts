/**
 * The HTML of the hosted decision pages: server-rendered, no JavaScript, one small card that fits a phone.
 * Every flow shares the layout and the steps; the flow supplies its title, terms and labels.
 */
import type { HostedFlow, HostedView, Note } from "./hosted-flow.ts";
import { SANDBOX_CODE } from "./person.service.ts";

/** Escapes text for HTML. */
export const escapeHtml = (s: string) =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );

const STYLE = `
  :root { color-scheme: light; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 17px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a; background: #f4f5f7; }
  main { max-width: 34rem; margin: 0 auto; padding: 1.25rem; }
  .card { background: #fff; border-radius: 12px; padding: 1.25rem; box-shadow: 0 1px 3px rgba(0,0,0,.12); }
  h1 { font-size: 1.4rem; line-height: 1.3; margin: 0 0 .75rem; }
  h2 { font-size: 1.05rem; margin: 1.25rem 0 .5rem; }
  ul { padding-left: 1.2rem; margin: .25rem 0; }
  li { margin: .4rem 0; }
  p { margin: .5rem 0; }
  table { width: 100%; border-collapse: collapse; margin: .25rem 0; }
  th, td { text-align: left; padding: .4rem .25rem; border-bottom: 1px solid #d5d8dc; }
  td.amount, th.amount { text-align: right; font-variant-numeric: tabular-nums; }
  tfoot td, tfoot th { font-weight: 700; border-bottom: none; }
  .muted { color: #4a4f57; font-size: .95rem; }
  .actions { display: flex; flex-direction: column; gap: .75rem; margin-top: 1.5rem; }
  button { font: inherit; font-weight: 600; min-height: 48px; border-radius: 10px; border: 2px solid #0b5cad; cursor: pointer; padding: .6rem 1rem; }
  button.accept { background: #0b5cad; color: #fff; }
  button.decline { background: #fff; color: #0b5cad; }
  button.link { background: none; border: none; color: #0b5cad; text-decoration: underline; min-height: 44px; padding: .25rem 0; }
  label { display: block; font-weight: 600; margin-top: 1rem; }
  input[name=code] { font: inherit; font-size: 1.4rem; letter-spacing: .3em; width: 100%; max-width: 12rem; min-height: 48px; padding: .4rem .6rem; border: 2px solid #4a4f57; border-radius: 8px; }
  input[name=code]:focus-visible { outline: 3px solid #1a1a1a; outline-offset: 2px; }
  .error { color: #a4000f; font-weight: 600; }
  .note { background: #fff7d6; border-radius: 8px; padding: .5rem .75rem; }
  .resend { margin-top: .75rem; }
  button:focus-visible { outline: 3px solid #1a1a1a; outline-offset: 2px; }
  @media (min-width: 30rem) { .actions { flex-direction: row-reverse; } .actions button { flex: 1; } }
`;

export function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
<div class="card">
${body}
</div>
</main>
</body>
</html>`;
}

/** A page that only tells: a title and a sentence. */
export function message(note: Note): string {
  return layout(note.title, `<h1>${escapeHtml(note.title)}</h1>\n<p>${escapeHtml(note.text)}</p>`);
}

export const NOT_ALLOWED: Note = { title: "Not allowed", text: "Open the link in your browser." };
export const FAILED: Note = { title: "Something went wrong", text: "Please try again in a moment." };
/** The database away for a moment (a restart, a failover) or too busy: nothing was done. */
export const UNAVAILABLE: Note = {
  title: "Try again in a moment",
  text: "This page could not be loaded just now, and nothing was changed. Reload it in a few seconds.",
};
export const NOT_FOUND: Note = {
  title: "Link not found",
  text: "Check that you opened the whole link from your messages.",
};
export const FORGED: Note = {
  title: "Please open the link again",
  text: "For your safety this request was refused. Open the link from your messages and try again.",
};
export const SOMEONE_ELSE: Note = {
  title: "This request is for someone else",
  text: "It was sent to another phone number than the one on your account, so you cannot answer it.",
};

/** Where a flow's forms post: the page itself. */
const action = (name: string, token: string) => `/${name}/${escapeHtml(token)}`;

const sandboxNote = (view: HostedView) =>
  view.environment === "sandbox"
    ? `<p class="note">Sandbox: no text message is sent. The code is <strong>${SANDBOX_CODE}</strong>.</p>`
    : "";

const decisionButtons = <V extends HostedView>(flow: HostedFlow<V>, view: V) => `<div class="actions">
<button class="accept" type="submit" name="decision" value="accept">${escapeHtml(flow.acceptLabel(view))}</button>
<button class="decline" type="submit" name="decision" value="decline">${escapeHtml(flow.declineLabel(view))}</button>
</div>`;

/** First step: the terms, and a button that texts the person a code. Nothing can be decided yet. */
export function introPage<V extends HostedView>(
  flow: HostedFlow<V>,
  view: V,
  csrf: string,
  token: string,
): string {
  return layout(
    flow.title(view),
    `${flow.terms(view)}
<h2>First, check it is you</h2>
<p>We will text a 6-digit code to your phone number ending in ${escapeHtml(view.phoneLast4)}.</p>
${sandboxNote(view)}
<form method="post" action="${action(flow.name, token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<div class="actions">
<button class="accept" type="submit" name="step" value="send">Text me a code</button>
</div>
</form>`,
  );
}

/** For a person the platform signed in (a prompt session): the terms and the decision, no code. */
export function sessionPage<V extends HostedView>(
  flow: HostedFlow<V>,
  view: V,
  csrf: string,
  token: string,
): string {
  return layout(
    flow.title(view),
    `${flow.terms(view)}
<p class="note">You are signed in to your account, so no code is needed.</p>
<form method="post" action="${action(flow.name, token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<input type="hidden" name="step" value="decide">
${decisionButtons(flow, view)}
</form>`,
  );
}

/** Second step: the code the person was texted, and their decision. */
export function codePage<V extends HostedView>(
  flow: HostedFlow<V>,
  view: V,
  csrf: string,
  token: string,
  problem?: string,
): string {
  const error = problem ? `<p class="error" id="code-error" role="alert">${escapeHtml(problem)}</p>` : "";
  return layout(
    flow.title(view),
    `${flow.terms(view)}
<h2>Enter the code we texted you</h2>
<p>We sent a 6-digit code to your phone number ending in ${escapeHtml(view.phoneLast4)}. It works for 10 minutes.</p>
${sandboxNote(view)}
<form method="post" action="${action(flow.name, token)}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<input type="hidden" name="step" value="decide">
<label for="code">Code</label>
<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required${problem ? ' aria-invalid="true" aria-describedby="code-error"' : ""}>
${error}
${decisionButtons(flow, view)}
</form>
<form method="post" action="${action(flow.name, token)}" class="resend">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<button class="link" type="submit" name="step" value="send">Send a new code</button>
</form>`,
  );
}
