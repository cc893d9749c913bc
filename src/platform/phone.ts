/** E.164: a plus sign, a country code that does not start with 0, 8 to 15 digits in all. */
const E164 = /^\+[1-9]\d{7,14}$/;

/** True for an E.164 phone number. */
export function isE164(value: string): boolean {
  return E164.test(value);
}

/** The last four digits, the only part of a phone number partners ever see. */
export function last4(phone: string): string {
  return phone.slice(-4);
}
