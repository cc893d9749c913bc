/** How a fixture user's money moves. */
export type Profile = "trader" | "salaried" | "gig" | "light";

/** A fixture user (CONTRACT.md §7): fixed id and phone number, the same in every deployment. */
export interface FixtureUser {
  id: string;
  phoneNumber: string;
  segment: "trader" | "salaried" | "gig" | "other";
  tier: "Unrated" | "Emerging" | "Established" | "Trusted";
  score: number;
  kyc: "NONE" | "BASIC" | "FULL";
  profile: Profile;
  joinedDaysAgo: number;
  /** The user's past loans from the fixture lender: installments as [days ago due, days late or "default"]. */
  loans: { principalKobo: bigint; installments: [number, number | "default"][] }[];
  about: string;
}

/** The sandbox fixture users: one per tier, a trader, a salaried and a gig worker, no KYC, a default. */
export const fixtureUsers: readonly FixtureUser[] = [
  {
    id: "usr_sandboxTrusted",
    phoneNumber: "+2348000000001",
    segment: "trader",
    tier: "Trusted",
    score: 812,
    kyc: "FULL",
    profile: "trader",
    joinedDaysAgo: 1_460,
    loans: [
      {
        principalKobo: 15_000_000n,
        installments: [
          [300, 0],
          [270, 0],
          [240, 0],
        ],
      },
      {
        principalKobo: 30_000_000n,
        installments: [
          [150, 0],
          [120, 1],
          [90, 0],
        ],
      },
    ],
    about: "Trusted tier; a market trader with busy daily sales; two loans repaid, on time but for one day.",
  },
  {
    id: "usr_sandboxEstablished",
    phoneNumber: "+2348000000002",
    segment: "salaried",
    tier: "Established",
    score: 655,
    kyc: "FULL",
    profile: "salaried",
    joinedDaysAgo: 900,
    loans: [
      {
        principalKobo: 20_000_000n,
        installments: [
          [200, 0],
          [170, 0],
        ],
      },
    ],
    about: "Established tier; salaried, paid on the 25th; one loan repaid on time.",
  },
  {
    id: "usr_sandboxEmerging",
    phoneNumber: "+2348000000003",
    segment: "gig",
    tier: "Emerging",
    score: 468,
    kyc: "BASIC",
    profile: "gig",
    joinedDaysAgo: 420,
    loans: [],
    about: "Emerging tier; a gig worker paid by several platforms most days; never borrowed.",
  },
  {
    id: "usr_sandboxUnrated",
    phoneNumber: "+2348000000004",
    segment: "other",
    tier: "Unrated",
    score: 0,
    kyc: "BASIC",
    profile: "light",
    joinedDaysAgo: 380,
    loans: [],
    about: "Unrated; light, irregular activity; never borrowed.",
  },
  {
    id: "usr_sandboxNoKyc",
    phoneNumber: "+2348000000005",
    segment: "trader",
    tier: "Emerging",
    score: 402,
    kyc: "NONE",
    profile: "trader",
    joinedDaysAgo: 400,
    loans: [],
    about: "A trader who has not completed KYC (level NONE).",
  },
  {
    id: "usr_sandboxDefaulted",
    phoneNumber: "+2348000000006",
    segment: "trader",
    tier: "Emerging",
    score: 351,
    kyc: "FULL",
    profile: "trader",
    joinedDaysAgo: 700,
    loans: [
      {
        principalKobo: 25_000_000n,
        installments: [
          [160, 0],
          [130, 3],
          [100, "default"],
        ],
      },
    ],
    about:
      "A trader with a default in their repayment history: one installment 3 days late, the last never collected.",
  },
];
