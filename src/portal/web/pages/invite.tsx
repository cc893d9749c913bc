import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useState } from "preact/hooks";
import { PortalAuthService } from "../../../../gen/portal/v1/auth_pb.ts";
import { navigate } from "../router.ts";
import { CopyButton, ErrorBox, Loading, Page } from "../ui.tsx";

/** The invite's token rides in the URL's fragment (never sent to a server or written to a log). */
function inviteToken(): string {
  return decodeURIComponent(location.hash.slice(1));
}

/** The end of enrolment: the recovery codes, shown once, then on to the portal. */
function RecoveryCodes({ recoveryCodes }: { recoveryCodes: string[] }) {
  const client = useQueryClient();
  const codes = recoveryCodes.join("\n");
  return (
    <Page title="You are signed in">
      <div class="shown-once" role="status">
        <p>
          <strong>Your recovery codes.</strong> Each signs you in once if you lose your authenticator app.
          They are shown only now: keep them somewhere safe.
        </p>
        <pre>{codes}</pre>
        <CopyButton value={codes} label="Copy the codes" />
      </div>
      <button
        type="button"
        onClick={() => {
          history.replaceState(null, "", "/portal/");
          void client.invalidateQueries();
          navigate("/");
        }}
      >
        Continue to the portal
      </button>
    </Page>
  );
}

/** Step 1: the password, typed twice; sent only when both are the same. */
function PasswordStep(props: {
  email: string;
  pending: boolean;
  error: unknown;
  onPassword: (password: string) => void;
}) {
  const [mismatch, setMismatch] = useState(false);
  return (
    <form
      class="panel narrow"
      onSubmit={(e) => {
        e.preventDefault();
        const f = new FormData(e.currentTarget);
        const password = String(f.get("password") ?? "");
        setMismatch(password !== String(f.get("again") ?? ""));
        if (password === String(f.get("again") ?? "")) props.onPassword(password);
      }}
    >
      <h2>1. Choose a password</h2>
      <input type="email" name="username" value={props.email} autoComplete="username" hidden readOnly />
      <label>
        Password <span class="muted">(12 to 128 characters)</span>
        <input
          name="password"
          type="password"
          required
          minLength={12}
          maxLength={128}
          autoComplete="new-password"
        />
      </label>
      <label>
        The same password again
        <input
          name="again"
          type="password"
          required
          minLength={12}
          maxLength={128}
          autoComplete="new-password"
        />
      </label>
      {mismatch ? (
        <p class="error" role="alert">
          The two passwords differ.
        </p>
      ) : null}
      <ErrorBox error={props.error} />
      <button type="submit" disabled={props.pending}>
        Continue
      </button>
    </form>
  );
}

/** Step 2: the authenticator key, as a QR code and as text, and the app's first code to prove it is enrolled. */
function AuthenticatorStep(props: {
  qrSvg: string;
  secret: string;
  pending: boolean;
  error: unknown;
  onCode: (code: string) => void;
}) {
  return (
    <form
      class="panel narrow"
      onSubmit={(e) => {
        e.preventDefault();
        props.onCode(String(new FormData(e.currentTarget).get("code") ?? "").replace(/\s+/g, ""));
      }}
    >
      <h2>2. Add the portal to your authenticator app</h2>
      <p>Scan this code with an authenticator app, or type the key below into it.</p>
      <img
        class="qr"
        alt="QR code of the authenticator key"
        src={`data:image/svg+xml;base64,${btoa(props.qrSvg)}`}
        width={200}
        height={200}
      />
      <p>
        Key: <code class="secret">{props.secret}</code> <CopyButton value={props.secret} />
      </p>
      <label>
        The 6-digit code the app shows now
        <input
          name="code"
          required
          inputMode="numeric"
          pattern="[0-9]{6}"
          autoComplete="one-time-code"
          maxLength={6}
        />
      </label>
      <ErrorBox error={props.error} />
      <button type="submit" disabled={props.pending}>
        Finish
      </button>
    </form>
  );
}

/** Accepting an invitation: choose a password, enrol an authenticator app, keep the recovery codes. */
export function InvitePage() {
  const [token] = useState(inviteToken);
  const invite = useQuery(PortalAuthService.method.getInvite, { token }, { retry: false });
  const accept = useMutation(PortalAuthService.method.acceptInvite);
  const confirm = useMutation(PortalAuthService.method.confirmEnrolment);

  if (confirm.data) return <RecoveryCodes recoveryCodes={confirm.data.recoveryCodes} />;
  if (invite.isPending) return <Loading />;
  if (invite.error)
    return (
      <Page title="This invitation cannot be used">
        <ErrorBox error={invite.error} />
        <p>Invitations work once and for 72 hours. Ask whoever invited you for a new one.</p>
      </Page>
    );
  const inv = invite.data;
  return (
    <Page title={`Join ${inv.partnerName} on the partner portal`}>
      <p>
        You are invited as <strong>{inv.email}</strong>, with the role <strong>{inv.role}</strong>.
      </p>
      {!accept.data ? (
        <PasswordStep
          email={inv.email}
          pending={accept.isPending}
          error={accept.error}
          onPassword={(password) => accept.mutate({ token, password })}
        />
      ) : (
        <AuthenticatorStep
          qrSvg={accept.data.qrSvg}
          secret={accept.data.secret}
          pending={confirm.isPending}
          error={confirm.error}
          onCode={(code) => confirm.mutate({ token, code })}
        />
      )}
    </Page>
  );
}
