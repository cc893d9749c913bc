import { type LendingTerms, MAX_TENOR_DAYS_CEILING } from "../partners/partner.service.ts";
import { addDays, isCalendarDate, lagosDay } from "../platform/dates.ts";
import { validationFailed } from "../platform/errors.ts";

/** What CreateDisbursement takes. */
export interface DisbursementInput {
  userId: string;
  principalKobo: bigint;
  destination: "WALLET" | "BANK" | undefined;
  reference: string;
  installments: { dueDate: string; amountKobo: bigint }[];
  /** How long the person has to answer the mandate (0: the default, 24). */
  acceptanceExpiresInHours: number;
}

const MAX_PRINCIPAL = 1_000_000_000_000n;
const REFERENCE = /^[\x21-\x7e]{1,64}$/;
/** The most installments a schedule may have; past it, the count is the answer. */
const MAX_INSTALLMENTS = 60;

type Problems = Record<string, string>;

/**
 * The schedule's own bounds: real dates, the first from tomorrow in Lagos, each after the one before and the
 * last within the tenor; positive amounts. Answers the total of the amounts that are valid.
 */
function checkSchedule(
  installments: DisbursementInput["installments"],
  now: Date,
  terms: LendingTerms | undefined,
  problems: Problems,
): bigint {
  const today = lagosDay(now);
  // Without the partner's terms (the check before any query), the longest tenor any partner may have.
  const tenorDays = terms?.maxTenorDays ?? MAX_TENOR_DAYS_CEILING;
  const lastAllowed = addDays(today, tenorDays);
  if (installments.length < 1 || installments.length > MAX_INSTALLMENTS)
    problems.repaymentSchedule = `must have 1 to ${MAX_INSTALLMENTS} installments`;
  let previous = today;
  let total = 0n;
  // Past 60, the count is the answer: the rest is not checked (nor listed back, however many were sent).
  const checked = installments.length > MAX_INSTALLMENTS ? [] : installments;
  checked.forEach((inst, i) => {
    const at = `repaymentSchedule.installments[${i}]`;
    if (!isCalendarDate(inst.dueDate)) problems[`${at}.dueDate`] = "must be a real date YYYY-MM-DD";
    else if (inst.dueDate <= previous)
      problems[`${at}.dueDate`] =
        i === 0
          ? `must be tomorrow (${addDays(today, 1)}, Lagos time) or later`
          : "must be after the previous installment";
    else if (inst.dueDate > lastAllowed)
      problems[`${at}.dueDate`] =
        `must be on or before ${lastAllowed}, ${tenorDays} days from today (${terms ? "the partner's tenor" : "the longest tenor allowed"})`;
    else previous = inst.dueDate;
    if (inst.amountKobo <= 0n) problems[`${at}.amountKobo`] = "must be positive";
    else total += inst.amountKobo;
  });
  return total;
}

/**
 * The request's own shape, then the bounds that hold even for a schedule the person accepts (CONTRACT.md
 * §6): real dates, the first from tomorrow in Lagos, the last within the partner's tenor, and a total
 * repayable within the partner's cost cap. `checkHours` throws when the mandate's hours are out of bounds.
 * Throws `validation_failed` with every problem found.
 */
export function validateDisbursement(
  input: DisbursementInput,
  now: Date,
  checkHours: (hours: number) => void,
  terms?: LendingTerms,
): void {
  const problems: Problems = {};
  if (input.principalKobo <= 0n || input.principalKobo > MAX_PRINCIPAL)
    problems.principalKobo = "must be 1 to 1000000000000 kobo";
  if (!input.destination) problems.destination = "must be WALLET or BANK";
  if (!REFERENCE.test(input.reference)) problems.reference = "must be 1 to 64 visible ASCII characters";
  try {
    checkHours(input.acceptanceExpiresInHours);
  } catch {
    problems.acceptanceExpiresInHours = "must be 1 to 168 (hours)";
  }
  const total = checkSchedule(input.installments, now, terms, problems);
  // total ≤ principal × (1 + maxCostBps / 10 000), in integers.
  const maxCostBps = BigInt(terms?.maxCostBps ?? 5_000);
  if (
    terms &&
    !problems.principalKobo &&
    total * 10_000n > input.principalKobo * (10_000n + maxCostBps) &&
    !Object.keys(problems).some((k) => k.endsWith("amountKobo"))
  ) {
    const cap = (input.principalKobo * (10_000n + maxCostBps)) / 10_000n;
    problems.repaymentSchedule = `the total repayable (${total} kobo) may not exceed ${cap} kobo: the principal plus the partner's cap of ${maxCostBps} basis points`;
  }
  if (Object.keys(problems).length) throw validationFailed(problems);
}
