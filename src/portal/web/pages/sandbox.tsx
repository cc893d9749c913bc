import type { DescMethodUnary } from "@bufbuild/protobuf";
import { useMutation } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { useContext, useState } from "preact/hooks";
import { CollectRepaymentRequest_Outcome, SandboxService } from "../../../../gen/partner/v1/sandbox_pb.ts";
import { CanWriteContext, EnvironmentContext } from "../api.ts";
import { ErrorBox, Page } from "../ui.tsx";

const TIERS = ["Unrated", "Emerging", "Established", "Trusted"] as const;

/**
 * The sandbox helpers, for the people and systems a partner cannot drive from outside: the person answering
 * a consent link or a mandate, the provider settling a debit, the platform re-scoring a user, and a reset.
 * Each is the same partner API call a partner's tests make (`/partner/v1/sandbox/…`).
 */
export function SandboxPage() {
  return (
    <Page title="Sandbox tools">
      <p>
        Act for the person, the payment provider or the platform. Each tool goes through the same code and
        sends the same events as the real thing, in your sandbox only.
      </p>
      <IdTool
        title="Answer a consent link as the person"
        label="Consent link id"
        pattern="cnl_[0-9A-Z]{26}"
        actions={[
          { name: "Accept", method: SandboxService.method.acceptConsentLink },
          { name: "Decline", method: SandboxService.method.declineConsentLink },
        ]}
      />
      <IdTool
        title="Revoke a consent as the person"
        label="Consent id"
        pattern="cns_[0-9A-Z]{26}"
        actions={[{ name: "Revoke", method: SandboxService.method.revokeConsentAsUser }]}
      />
      <IdTool
        title="Answer a repayment mandate as the person"
        label="Disbursement id"
        pattern="dsb_[0-9A-Z]{26}"
        actions={[
          { name: "Accept", method: SandboxService.method.acceptDisbursement },
          { name: "Decline", method: SandboxService.method.declineDisbursement },
        ]}
      />
      <IdTool
        title="Settle a payout as the provider"
        label="Disbursement id"
        pattern="dsb_[0-9A-Z]{26}"
        actions={[
          { name: "Fail the payout", method: SandboxService.method.failDisbursement },
          { name: "Reverse the payout", method: SandboxService.method.reverseDisbursement },
        ]}
      />
      <CollectTool />
      <StandingTool />
      <ResetTool />
    </Page>
  );
}

type IdMethod = DescMethodUnary<typeof SandboxService.method.acceptConsentLink.input, never>;

/** One form: an id, and one button per action on it. */
function IdTool(props: {
  title: string;
  label: string;
  pattern: string;
  actions: { name: string; method: unknown }[];
}) {
  const [id, setId] = useState("");
  const valid = new RegExp(`^${props.pattern}$`).test(id.trim());
  return (
    <form class="panel" onSubmit={(e) => e.preventDefault()}>
      <h2>{props.title}</h2>
      <label>
        {props.label}
        <input value={id} onInput={(e) => setId(e.currentTarget.value)} required pattern={props.pattern} />
      </label>
      <ActionRow id={valid ? id.trim() : ""} actions={props.actions} />
    </form>
  );
}

/**
 * The sandbox's tools for one object, on its page (in the sandbox only): a button per action, and what the last
 * one did said under them.
 */
export function SandboxActions(props: {
  id: string;
  title: string;
  actions: { name: string; method: unknown }[];
}) {
  const env = useContext(EnvironmentContext);
  const canWrite = useContext(CanWriteContext);
  if (env !== "sandbox" || !canWrite || props.actions.length === 0) return null;
  return (
    <section class="panel" aria-label={props.title}>
      <h2>{props.title}</h2>
      <ActionRow id={props.id} actions={props.actions} />
    </section>
  );
}

/** A button per action on `id`, and what the last one did, said under them (not between them). */
function ActionRow(props: { id: string; actions: { name: string; method: unknown }[] }) {
  const [said, setSaid] = useState<{ name: string; error?: unknown } | undefined>();
  return (
    <>
      <div class="actions">
        {props.actions.map((a) => (
          <IdAction
            key={a.name}
            id={props.id}
            name={a.name}
            method={a.method as IdMethod}
            onDone={(error) => setSaid({ name: a.name, error })}
          />
        ))}
      </div>
      {said?.error ? <ErrorBox error={said.error} /> : null}
      {said && !said.error ? <p role="status">{said.name}: done.</p> : null}
    </>
  );
}

function IdAction(props: { id: string; name: string; method: IdMethod; onDone: (error?: unknown) => void }) {
  const client = useQueryClient();
  const run = useMutation(props.method, {
    onSuccess: () => {
      props.onDone();
      void client.invalidateQueries();
    },
    onError: (error) => props.onDone(error),
  });
  return (
    <button
      type="button"
      class="secondary"
      disabled={!props.id || run.isPending}
      onClick={() => run.mutate({ id: props.id })}
    >
      {props.name}
    </button>
  );
}

function CollectTool() {
  const collect = useMutation(SandboxService.method.collectRepayment);
  return (
    <form
      class="panel"
      onSubmit={(e) => {
        e.preventDefault();
        const f = new FormData(e.currentTarget);
        collect.mutate({
          id: String(f.get("id") ?? "").trim(),
          outcome:
            f.get("outcome") === "FAILURE"
              ? CollectRepaymentRequest_Outcome.FAILURE
              : CollectRepaymentRequest_Outcome.SUCCESS,
        });
      }}
    >
      <h2>Collect a repayment as the provider</h2>
      <label>
        Repayment id
        <input name="id" required pattern="rpy_[0-9A-Z]{26}" />
      </label>
      <fieldset>
        <legend>Outcome</legend>
        <label class="check">
          <input type="radio" name="outcome" value="SUCCESS" defaultChecked /> Collected
        </label>
        <label class="check">
          <input type="radio" name="outcome" value="FAILURE" /> Failed
        </label>
      </fieldset>
      <ErrorBox error={collect.error} />
      {collect.isSuccess ? <p role="status">Done.</p> : null}
      <button type="submit" disabled={collect.isPending}>
        Settle the debit
      </button>
    </form>
  );
}

function StandingTool() {
  const set = useMutation(SandboxService.method.setStanding);
  return (
    <form
      class="panel"
      onSubmit={(e) => {
        e.preventDefault();
        const f = new FormData(e.currentTarget);
        set.mutate({
          userId: String(f.get("userId") ?? "").trim(),
          tier: String(f.get("tier")),
          score: Number(f.get("score")),
        });
      }}
    >
      <h2>Re-score a sandbox user as the platform</h2>
      <label>
        User id
        <input name="userId" required pattern="usr_[0-9A-Za-z]+" placeholder="usr_sandboxTrusted" />
      </label>
      <label>
        Tier
        <select name="tier">
          {TIERS.map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
      </label>
      <label>
        Score (0 to 1000)
        <input name="score" type="number" required min={0} max={1000} step={1} inputMode="numeric" />
      </label>
      <ErrorBox error={set.error} />
      {set.isSuccess ? <p role="status">Done: a tier change sends standing.tier_changed.</p> : null}
      <button type="submit" disabled={set.isPending}>
        Set the standing
      </button>
    </form>
  );
}

function ResetTool() {
  const client = useQueryClient();
  const reset = useMutation(SandboxService.method.resetSandbox, {
    onSuccess: () => void client.invalidateQueries(),
  });
  return (
    <div class="panel">
      <h2>Reset the sandbox</h2>
      <p>
        Puts your sandbox users back as on their first day: your consents, links and loans on them are
        removed.
      </p>
      <ErrorBox error={reset.error} />
      {reset.data ? (
        <p role="status">
          Reset: {reset.data.consents} consents, {reset.data.consentLinks} links, {reset.data.disbursements}{" "}
          disbursements, {reset.data.standings} standings and {reset.data.ledgerEntries} ledger lines removed.
        </p>
      ) : null}
      <button
        type="button"
        class="danger"
        disabled={reset.isPending}
        onClick={() =>
          confirm("Reset your sandbox? Your sandbox data on the fixture users is removed.") &&
          reset.mutate({})
        }
      >
        Reset the sandbox
      </button>
    </div>
  );
}
