import { LIMITS_USAGE } from "./limits.ts";

/** Every command's usage, and how the command line finds the service. */
export const USAGE = `Usage: npm run cli -- <command> [options] [--json]

  partner create --name NAME --fee-bps BPS      create a partner (fee in basis points, 0-10000)
  partner list                                   list partners
  partner set-fee --partner ID --fee-bps BPS     change a partner's fee rate
  partner set-terms --partner ID --max-cost-bps BPS --max-tenor-days DAYS
                                                 change a partner's lending caps (defaults 5000 and 365)
${LIMITS_USAGE}
  key issue --partner ID --env sandbox|production
                                                 issue a partner's API key (shown once)
  key roll --key-id ID [--expires-in-hours H]    replace a key; the old one works for H hours (default 24)
  key revoke --key-id ID                         revoke a key at once
  key list --partner ID                          list a partner's keys
  signing-key list --env sandbox|production      list published snapshot-signing keys
  signing-key rotate --env sandbox|production    rotate the signing key now
  sandbox seed [--partner ID]                    seed the sandbox fixture users now; with --partner, also
                                                 restore that partner's sandbox to its first day
  ledger rebuild --user ID[,ID...]               rebuild users' ledger roll-ups from their raw entries (at
                                                 most 100 users a call; ingest waits while it runs)
  portal invite --partner ID --email EMAIL --role admin|developer|viewer
                                                 invite a person to the partner's portal: prints a single-use
                                                 URL, valid 72 hours (give it to them; it is not shown again)

The internal API is found through INTERNAL_URL and INTERNAL_TOKEN, or DATA_DIR of a service started with
\`npm start\`. With --json every command prints one JSON object (use \`npm run -s cli\` to keep npm quiet).`;

const FOOTER = USAGE.slice(USAGE.indexOf("\n\nThe internal API") + 2);

/** The usage of one command: its lines of {@link USAGE} (the command's line and those continuing it). */
export function usageOf(name: string): string | undefined {
  const lines = USAGE.split("\n");
  const start = lines.findIndex((l) => l.startsWith(`  ${name} `) || l === `  ${name}`);
  if (start === -1) return undefined;
  const own = [lines[start] as string];
  for (const l of lines.slice(start + 1)) {
    if (!/^ {10,}\S/.test(l)) break;
    own.push(l);
  }
  return `Usage: npm run cli -- ${name} [options] [--json]\n\n${own.join("\n")}\n\n${FOOTER}`;
}
