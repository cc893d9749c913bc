import { useMutation } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { PortalAuthService } from "../../../../gen/portal/v1/auth_pb.ts";
import { ErrorBox, Page } from "../ui.tsx";

/** Email, password and the code from the authenticator app (or a recovery code). */
export function SignInPage() {
  const client = useQueryClient();
  const signIn = useMutation(PortalAuthService.method.signIn, {
    onSuccess: () => void client.resetQueries(),
  });
  return (
    <Page title="Sign in to the partner portal">
      <form
        class="panel narrow"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          signIn.mutate({
            email: String(f.get("email") ?? ""),
            password: String(f.get("password") ?? ""),
            code: String(f.get("code") ?? "").replace(/\s+/g, ""),
          });
        }}
      >
        <label>
          Email
          <input name="email" type="email" required autoComplete="username" />
        </label>
        <label>
          Password
          <input name="password" type="password" required autoComplete="current-password" />
        </label>
        <label>
          Code from your authenticator app, or a recovery code
          <input name="code" required autoComplete="one-time-code" spellcheck={false} />
        </label>
        <ErrorBox error={signIn.error} />
        <button type="submit" disabled={signIn.isPending}>
          Sign in
        </button>
      </form>
      <p class="muted">
        No account? Ask your organisation's portal admin, or your account manager, for an invitation.
      </p>
    </Page>
  );
}
