import type { Config } from "../config.ts";
import type { Clock } from "../platform/clock.ts";
import type { DataKeys } from "../platform/crypto/data-keys.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { ChangeFeed } from "../platform/db/change-feed.ts";
import type { Orm } from "../platform/db/orm.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import type { Logger } from "../platform/logger.ts";
import type { Resolver } from "../webhooks/destination.ts";

/** What every service is built from. */
export interface ServiceDeps {
  config: Readonly<Config>;
  /** For the metrics gauges only, which read the database once per scrape; services are given an `em`. */
  orm: Orm;
  clock: Clock;
  changes: ChangeFeed;
  box: SecretBox;
  jobs: Jobs;
  logger: Logger;
  /** DNS for webhook destinations; tests replace it to play DNS. */
  resolver?: Resolver;
  /** Tests only: local webhook destinations for production subscriptions too (see `DestinationPolicy`). */
  productionLocalWebhooks?: boolean;
  /** Keys for keyed hashes and CSRF tokens, kept sealed in the database. */
  dataKeys: DataKeys;
  /** Base URL of pages people open (consent links): PUBLIC_URL, or the partner listener once bound. */
  publicUrl: () => string;
}
