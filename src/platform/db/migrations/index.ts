import { Migration20261122000000_foundation } from "./Migration20261122000000_foundation.ts";

/** Every migration, oldest first. Listed explicitly so no file discovery is needed at run time. */
export const migrations = [
  { name: "Migration20261122000000_foundation", class: Migration20261122000000_foundation },
];
