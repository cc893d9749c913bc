// The layers, as Biome checks them: `node scripts/layers.ts` writes biome.layers.json (the overrides biome.json
// extends) from the tables below; `node scripts/layers.ts --check` (run by `npm run lint`) fails when that file
// says something else.
// Biome's noRestrictedImports does the checking (a back-edge fails `biome check` with the rule's message); this
// file only keeps its configuration in one readable place, since Biome replaces, not merges, the options of a
// rule set by two overrides, so every override must carry the whole list for its files.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

/**
 * The features, lowest first. A feature imports only features before it, and only through their public files,
 * so no two folders import each other (docs/architecture.md).
 */
export const FEATURES = [
  "retention",
  "users",
  "partners",
  "ratelimit",
  "idempotency",
  "person",
  "portal",
  "apikeys",
  "signing",
  "limits",
  "webhooks",
  "consent",
  "ledger",
  "standing",
  "disbursements",
  "snapshot",
  "sandbox",
  "requestlog",
  "docs",
] as const;

/** The composition root: what builds and starts the service. Nothing below it imports it. */
const COMPOSITION = [
  "config.ts",
  "config/**",
  "services.ts",
  "services/**",
  "app.ts",
  "entities.ts",
  "main.ts",
  "runtime.ts",
  "running-services.ts",
  "master-key.ts",
  "cli/**",
];

const ARCH = "(docs/architecture.md)";
type Pattern = { group: string[]; message: string };
const restrict = (patterns: Pattern[]) => ({
  linter: { rules: { style: { noRestrictedImports: { level: "error", options: { patterns } } } } },
});

const REPOSITORY: Pattern = {
  group: ["../**/*.repository.ts", "../**/*.repository"],
  message: `A feature's repository is private to it: ask that feature's service ${ARCH}.`,
};
const PLATFORM: Pattern = {
  group: [
    ...FEATURES.map((f) => `**/${f}/**`),
    "**/edge/**",
    ...COMPOSITION.flatMap((c) => [`../${c}`, `../../${c}`]),
  ],
  message: `The platform imports no feature, no edge and nothing of the composition root: the layers go main → app → edge → features → platform → gen ${ARCH}.`,
};
const EDGE_UP: Pattern = {
  group: COMPOSITION.map((c) => `../${c}`),
  message: `The edge imports nothing of the composition root: it is given what it serves (edge/dependencies.ts) ${ARCH}.`,
};
const EDGE_PRIVATE: Pattern = {
  group: ["../*/*.repository.ts", "../*/*.entity.ts"],
  message: `The edge reaches the features through their services and handlers, never their repositories or entities ${ARCH}.`,
};
const UP: Pattern = {
  group: ["**/edge/**", ...COMPOSITION.flatMap((c) => [`../${c}`, `../../${c}`])],
  message: `A feature never imports the edge or the composition root (src/*.ts, src/config/, src/cli/): the layers go main → app → edge → features → platform → gen ${ARCH}.`,
};
const GEN: Pattern = {
  group: ["**/gen/**", "**/platform/http/**", "**/platform/rpc/**", "@connectrpc/*"],
  message: "Services and entities hold the rules: they never import generated code or the transport layers.",
};
const WEB: Pattern = {
  group: [
    "**/platform/**",
    "**/edge/**",
    "**/*.service.ts",
    "**/*.repository.ts",
    "**/*.entity.ts",
    "node:*",
  ],
  message:
    "The portal's pages run in browsers: they import generated messages and each other, no server code.",
};
const SDK: Pattern = {
  group: ["../*", "!../sdk/**", "node:*"],
  message: "The SDK runs in browsers and imports nothing from the server.",
};

/** What files of a kind may import of the features before theirs. */
const PUBLIC = {
  /** Services and request context keys: what any file of a feature may call. */
  any: ["*.service.ts", "*.context.ts"],
  /** Handlers may also present another feature's objects with its own proto mappers. */
  handlers: ["*.service.ts", "*.context.ts", "*.handlers.ts"],
  /** An entity may name another's entity: a foreign key of the schema. */
  entity: ["*.service.ts", "*.context.ts", "*.entity.ts"],
};

/** Another feature, for a file of `feature`: only those before it, only their public files of `kind`. */
function cross(feature: (typeof FEATURES)[number], kind: keyof typeof PUBLIC): Pattern {
  const before = FEATURES.slice(0, FEATURES.indexOf(feature));
  const files = PUBLIC[kind].join(", ");
  return {
    group: [
      "../*/**",
      "!../platform/**",
      "!../sdk/**",
      "!../../gen/**",
      ...before.flatMap((f) => PUBLIC[kind].map((file) => `!../${f}/${file}`)),
    ],
    message:
      `${feature} imports only the features before it in scripts/layers.ts (${before.join(", ") || "none"}), ` +
      `and of those only ${files} ${ARCH}.`,
  };
}

/** Each feature's files by kind, with the whole list of what they may not import. */
function featureOverrides(feature: (typeof FEATURES)[number]) {
  const dir = `src/${feature}`;
  return [
    { includes: [`${dir}/**`, "!src/portal/web/**"], ...restrict([UP, cross(feature, "any")]) },
    { includes: [`${dir}/*.handlers.ts`], ...restrict([UP, cross(feature, "handlers")]) },
    {
      includes: [`${dir}/*.service.ts`, `${dir}/*.repository.ts`],
      ...restrict([GEN, UP, cross(feature, "any")]),
    },
    { includes: [`${dir}/*.entity.ts`], ...restrict([GEN, UP, cross(feature, "entity")]) },
  ];
}

/** Every override of biome.json, in order (a later one wins for the files it includes). */
export function overrides(): object[] {
  return [
    {
      includes: ["src/**", "!src/platform/db/migrations/**"],
      linter: {
        rules: {
          complexity: {
            noExcessiveLinesPerFunction: { level: "error", options: { maxLines: 60, skipBlankLines: true } },
          },
          style: {
            noExcessiveLinesPerFile: { level: "error", options: { maxLines: 300, skipBlankLines: true } },
          },
        },
      },
    },
    // The composition root wires each feature's purge steps (its *-retention.repository.ts) into the purge.
    { includes: ["src/**", "!src/sdk/**", "!src/services/**"], ...restrict([REPOSITORY]) },
    { includes: ["src/platform/**"], ...restrict([PLATFORM]) },
    { includes: ["src/edge/**"], ...restrict([EDGE_UP, EDGE_PRIVATE]) },
    ...FEATURES.flatMap(featureOverrides),
    { includes: ["src/portal/web/**"], ...restrict([WEB]) },
    { includes: ["src/sdk/**"], ...restrict([SDK]) },
    {
      includes: ["src/cli/**", "scripts/**", "bench/**", "test/**", "examples/**"],
      linter: { rules: { suspicious: { noConsole: "off", noExplicitAny: "off" } } },
    },
  ];
}

const file = path.resolve(import.meta.dirname, "../biome.layers.json");
const text = `${JSON.stringify({ $schema: "./node_modules/@biomejs/biome/configuration_schema.json", overrides: overrides() })}\n`;
if (process.argv.includes("--check")) {
  if (readFileSync(file, "utf8") !== text) {
    process.stderr.write("biome.layers.json differs from scripts/layers.ts: run `node scripts/layers.ts`\n");
    process.exit(1);
  }
} else writeFileSync(file, text);
