// `npm run check:advisories`, run by CI: the supply-chain checks that can be made from here.
//
// 1. Known vulnerabilities in the locked dependency tree, from npm's advisory database (the service behind
//    `npm audit`): every package and version of package-lock.json is sent to the registry's bulk advisory
//    endpoint, and an advisory of severity high or critical that covers a locked version fails the check.
//    Where that endpoint cannot be reached (this build network's registry answers 405 to it, as to
//    `npm audit`), the check says so plainly and does not pretend to have passed: it prints that no
//    advisory data was available, and goes on to the checks that can be made.
// 2. Deprecations, from the registry's own metadata (which this network does serve): a locked version its
//    maintainers deprecated is reported, and one deprecated for a security reason (the notice speaks of a
//    vulnerability, a CVE, a security fix, malware or a compromise) fails the check. It is no substitute for
//    advisories: most vulnerable versions are never deprecated. It catches the ones maintainers pull. A
//    registry whose metadata carries no notices (this build network's mirror strips them) is detected by a
//    version known to be deprecated, request@2.88.2, and the check says NOT CHECKED rather than pass.
// 3. The runtime: the `node` devDependency (the Node the project runs on) must be the newest Node 24 release
//    on the registry, pinned exactly; an older pin fails the check (Node's security releases are patch
//    releases of the line).
// Exits 1 when a check fails.
import { readFileSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const registry = (process.env.npm_config_registry ?? "https://registry.npmjs.org/").replace(/\/?$/, "/");
const TIMEOUT_MS = 20_000;
let failed = false;

const lock = JSON.parse(readFileSync(path.join(root, "package-lock.json"), "utf8")) as {
  packages: Record<string, { version?: string; link?: boolean }>;
};
const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
  devDependencies: Record<string, string>;
};

// Every locked package, by name, with its versions.
const tree = new Map<string, Set<string>>();
for (const [where, entry] of Object.entries(lock.packages)) {
  // Only what npm fetched: not the root, not the workspace packages of this repository (packages/sdk) nor
  // their links, which no registry knows.
  if (!where.includes("node_modules/") || entry.link || !entry.version) continue;
  const name = where.slice(where.lastIndexOf("node_modules/") + "node_modules/".length);
  if (!tree.has(name)) tree.set(name, new Set());
  tree.get(name)?.add(entry.version);
}

// 1. Advisories.
type Advisory = { id: number; title: string; severity: string; vulnerable_versions: string; url: string };
const body = JSON.stringify(Object.fromEntries([...tree].map(([name, versions]) => [name, [...versions]])));
try {
  const res = await fetch(`${registry}-/npm/v1/security/advisories/bulk`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  if (!res.ok) {
    console.log(
      `advisories: NOT CHECKED. ${registry} answered ${res.status} to the bulk advisory request (the source ` +
        "of `npm audit`), so no advisory data is available from this network. Run `npm audit` where the " +
        "registry's advisory endpoint is reachable.",
    );
  } else {
    const found = (await res.json()) as Record<string, Advisory[]>;
    let count = 0;
    for (const [name, advisories] of Object.entries(found)) {
      for (const a of advisories) {
        count++;
        const serious = a.severity === "high" || a.severity === "critical";
        if (serious) failed = true;
        console.log(
          `advisories: ${serious ? "FAIL" : "note"} ${name} ${a.vulnerable_versions}: ${a.title} (${a.severity}, ${a.url})`,
        );
      }
    }
    console.log(`advisories: ${tree.size} locked packages checked, ${count} advisories`);
  }
} catch (err) {
  console.log(`advisories: NOT CHECKED. The registry could not be asked (${(err as Error).message}).`);
}

// 2. Deprecations.
const SECURITY_WORDS = /secur|vulnerab|\bCVE-|\bGHSA-|malicious|malware|compromis/i;
const packument = async (name: string) => {
  const res = await fetch(`${registry}${name.replace("/", "%2f")}`, {
    headers: { accept: "application/vnd.npm.install-v1+json" },
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  if (!res.ok) throw new Error(`the registry answered ${res.status} for ${name}`);
  return (await res.json()) as { versions?: Record<string, { deprecated?: string }> };
};
try {
  if (!(await packument("request")).versions?.["2.88.2"]?.deprecated)
    throw new Error("its metadata carries no deprecation notices: request@2.88.2 shows none");
  const names = [...tree.keys()];
  const deprecated: string[] = [];
  let next = 0;
  // Sixteen packuments at a time, abbreviated (the form npm install reads): about two seconds for the tree.
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < names.length) {
        const name = names[next++] as string;
        const doc = await packument(name);
        for (const version of tree.get(name) ?? []) {
          const notice = doc.versions?.[version]?.deprecated;
          if (!notice) continue;
          const serious = SECURITY_WORDS.test(notice);
          if (serious) failed = true;
          deprecated.push(`deprecations: ${serious ? "FAIL" : "note"} ${name}@${version}: ${notice}`);
        }
      }
    }),
  );
  for (const line of deprecated.sort()) console.log(line);
  console.log(`deprecations: ${tree.size} locked packages checked, ${deprecated.length} deprecated versions`);
} catch (err) {
  console.log(`deprecations: NOT CHECKED. ${registry}: ${(err as Error).message}.`);
}

// 3. The Node pin.
const pinned = pkg.devDependencies.node ?? "";
try {
  const res = await fetch(`${registry}node`, {
    headers: { accept: "application/vnd.npm.install-v1+json" },
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  if (!res.ok) throw new Error(`the registry answered ${res.status}`);
  const versions = Object.keys(((await res.json()) as { versions: Record<string, unknown> }).versions);
  const newest = versions
    .filter((v) => /^24\.\d+\.\d+$/.test(v))
    .sort((a, b) => {
      const [x, y] = [a, b].map((v) => v.split(".").map(Number));
      return (x?.[1] ?? 0) - (y?.[1] ?? 0) || (x?.[2] ?? 0) - (y?.[2] ?? 0);
    })
    .at(-1);
  if (!/^\d+\.\d+\.\d+$/.test(pinned)) {
    failed = true;
    console.log(`node: FAIL the node devDependency is "${pinned}", not an exact version`);
  } else if (newest && pinned !== newest) {
    failed = true;
    console.log(
      `node: FAIL pinned ${pinned}; the newest Node 24 release is ${newest}: pin it (npm install -D -E node@${newest})`,
    );
  } else {
    console.log(`node: pinned ${pinned}, the newest Node 24 release`);
  }
} catch (err) {
  console.log(`node: NOT CHECKED. The registry could not be asked (${(err as Error).message}).`);
}

process.exit(failed ? 1 : 0);
