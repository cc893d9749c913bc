import type { ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { schema } from "../../src/entities.ts";
import { type EmbeddedDatabase, freePort, startEmbeddedPostgres } from "../../src/platform/db/embedded.ts";
import { migrate } from "../../src/platform/db/orm.ts";
import { startBoss } from "../../src/platform/jobs/boss.ts";
import { createLogger } from "../../src/platform/logger.ts";
import {
  confString,
  conninfoValue,
  copyCluster,
  countStatements,
  postgresUser,
  query,
  startStandbyServer,
  stopServer,
  until,
  withPort,
} from "./standby-server.ts";

/** A real streaming hot standby of the primary of a {@link ReplicatedCluster}, read-only. */
export interface Replica {
  /** Replication slot and `application_name` of its WAL receiver (as `pg_stat_replication` shows it). */
  name: string;
  /** URL of the service's database on the replica (the same database as the primary's, read-only). */
  url: string;
  port: number;
  /** Stops applying WAL (the replica falls behind, as a lagging one does); resolves once replay is paused. */
  pauseReplay(): Promise<void>;
  /** Applies WAL again; follow with {@link ReplicatedCluster.waitCaughtUp} to wait until it has caught up. */
  resumeReplay(): Promise<void>;
  /** Fast shutdown of the replica's server (a replica that goes away); its slot keeps the WAL it will need. */
  stop(): Promise<void>;
  /** Starts the replica again on the same port and data; it resumes streaming where it stopped. */
  start(): Promise<void>;
  /** `pg_last_wal_replay_lsn()`: how far the replica has applied the primary's WAL. */
  replayLsn(): Promise<string>;
  /**
   * Calls that pg_stat_statements counted on this server alone (a hot standby counts the statements run on it)
   * whose query text contains `filter`, case-insensitively; every call when unset; 0 if none. Proves which
   * server a query went to: mark it (a column alias such as `as routed_marker_1`, which normalisation keeps).
   */
  statements(filter?: string): Promise<number>;
  /** Forgets this server's pg_stat_statements counts. */
  resetStatements(): Promise<void>;
  /**
   * Applies each commit `ms` after the primary made it (`recovery_min_apply_delay`): a replica that lags
   * without being paused. 0 turns it off; {@link ReplicatedCluster.waitCaughtUp} then waits for what was held.
   */
  setApplyDelay(ms: number): Promise<void>;
}

/** A PostgreSQL primary of its own, with the service's schema, and real streaming hot standbys of it. */
export interface ReplicatedCluster {
  /** URL of the migrated database (`partner_api`) on the primary. */
  primaryUrl: string;
  /** URL of the primary's `postgres` database. */
  adminUrl: string;
  primaryPort: number;
  replicas: Replica[];
  /**
   * Waits until every running replica whose replay is not paused has applied all WAL the primary had written
   * when called (so a commit made before the call is visible there); throws after 30 s.
   */
  waitCaughtUp(): Promise<void>;
  /** As {@link Replica.statements}, on the primary. */
  primaryStatements(filter?: string): Promise<number>;
  resetPrimaryStatements(): Promise<void>;
  /**
   * Fast shutdown of the primary, then (after `downMs`, as a failover keeps it away) a start on the same port;
   * the replicas reconnect by themselves.
   */
  restartPrimary(downMs?: number): Promise<void>;
  /** Stops the replicas and the primary and removes their data. */
  stop(): Promise<void>;
}

/** Options for {@link startReplicatedCluster}. */
export interface ReplicatedClusterOptions {
  /** How many replicas; 1 by default. */
  replicas?: number;
}

const DATABASE = "partner_api";
/**
 * Starts a PostgreSQL primary of its own (not the run's shared test server, so a test may pause, stop and
 * restart it) with the service's schema migrated, and `replicas` real streaming hot standbys of it, made
 * from a base copy taken by SQL, each on a physical replication slot. Statements are counted on every server
 * (pg_stat_statements), so a test can tell which server a query ran on.
 */
export async function startReplicatedCluster(
  options: ReplicatedClusterOptions = {},
): Promise<ReplicatedCluster> {
  const count = options.replicas ?? 1;
  const logger = createLogger({ level: "warn", write: (line) => process.stderr.write(`${line}\n`) });
  const dirs: string[] = [];
  const tempDir = async (prefix: string) => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
    dirs.push(dir);
    // As root the server runs as the `postgres` user, which must be able to enter the directory.
    await fs.chmod(dir, 0o755);
    return dir;
  };
  const replicas: Array<Replica & { running: boolean; paused: boolean }> = [];
  let primary: EmbeddedDatabase | undefined;
  try {
    const primaryDir = await tempDir("partner-api-primary-");
    primary = await startEmbeddedPostgres({ dataDir: primaryDir, database: DATABASE, logger });
    const primaryPort = Number(new URL(primary.url).port);
    const primaryUrl = primary.url;
    const adminUrl = primary.adminUrl;
    const password = decodeURIComponent(new URL(primaryUrl).password);
    // The schema, pg-boss and its queues, as the test run's template gets them (test/support/global-setup.ts).
    await migrate(primaryUrl, schema, logger);
    const boss = await startBoss({ databaseUrl: primaryUrl, logger, supervise: false });
    await boss.stop({ graceful: false, close: true });
    // startEmbeddedPostgres takes no server flags: the settings go in postgresql.auto.conf, which the copies
    // inherit, and the primary starts again on the same port to load pg_stat_statements.
    await query(adminUrl, "alter system set shared_preload_libraries = 'pg_stat_statements'");
    await query(adminUrl, "alter system set hot_standby_feedback = on");
    await query(adminUrl, "alter system set wal_retrieve_retry_interval = '100ms'");
    await primary.stop();
    primary = await startEmbeddedPostgres({
      dataDir: primaryDir,
      database: DATABASE,
      logger,
      port: primaryPort,
    });
    await query(primaryUrl, "create extension if not exists pg_stat_statements");

    const names = Array.from({ length: count }, (_, i) => `replica_${i + 1}`);
    const owner = await postgresUser();
    const copies: string[] = [];
    const holder = new pg.Client({ connectionString: adminUrl });
    await holder.connect();
    try {
      // Each slot keeps the WAL from now on until its replica has it, through a replica's stop too.
      for (const name of names)
        await holder.query("select pg_create_physical_replication_slot($1, true)", [name]);
      await holder.query("select pg_backup_start($1, true)", ["replication-harness"]);
      for (const name of names) {
        const dir = await tempDir(`partner-api-${name.replace("_", "-")}-`);
        await copyCluster(path.join(primaryDir, "pg"), path.join(dir, "pg"), owner);
        copies.push(dir);
      }
      const stopped = await holder.query<{ labelfile: string; spcmapfile: string | null }>(
        "select labelfile, spcmapfile from pg_backup_stop(true)",
      );
      const { labelfile, spcmapfile } = stopped.rows[0] ?? { labelfile: "", spcmapfile: null };
      for (const dir of copies) {
        const clusterDir = path.join(dir, "pg");
        const files: Array<[string, string]> = [["backup_label", labelfile]];
        if (spcmapfile) files.push(["tablespace_map", spcmapfile]);
        files.push(["standby.signal", ""]);
        for (const [file, content] of files) {
          await fs.writeFile(path.join(clusterDir, file), content, { mode: 0o600 });
          if (owner) await fs.chown(path.join(clusterDir, file), owner.uid, owner.gid);
        }
      }
    } finally {
      await holder.end();
    }

    for (const [i, name] of names.entries()) {
      const clusterDir = path.join(copies[i] ?? "", "pg");
      const conninfo = [
        ["host", "127.0.0.1"],
        ["port", String(primaryPort)],
        ["user", "postgres"],
        ["password", password],
        ["application_name", name],
      ]
        .map(([k, v]) => `${k}=${conninfoValue(v ?? "")}`)
        .join(" ");
      await fs.appendFile(
        path.join(clusterDir, "postgresql.auto.conf"),
        `primary_conninfo = ${confString(conninfo)}\nprimary_slot_name = ${confString(name)}\nhot_standby = on\n`,
      );
      const port = await freePort();
      const url = withPort(primaryUrl, port);
      let server: ChildProcess | undefined;
      const replica = {
        name,
        url,
        port,
        running: false,
        paused: false,
        async start() {
          if (replica.running) return;
          server = await startStandbyServer(clusterDir, port, logger);
          replica.running = true;
          replica.paused = false;
        },
        async stop() {
          if (server) await stopServer(server);
          replica.running = false;
        },
        async pauseReplay() {
          await query(url, "select pg_wal_replay_pause()");
          replica.paused = true;
          let state = "";
          await until(
            async () => {
              state =
                (await query<{ s: string }>(url, "select pg_get_wal_replay_pause_state() as s"))[0]?.s ?? "";
              return state === "paused";
            },
            () => `${name}: WAL replay did not pause (state ${state})`,
          );
        },
        async resumeReplay() {
          await query(url, "select pg_wal_replay_resume()");
          replica.paused = false;
        },
        async replayLsn() {
          return (
            (await query<{ lsn: string }>(url, "select pg_last_wal_replay_lsn()::text as lsn"))[0]?.lsn ?? ""
          );
        },
        statements: (filter?: string) => countStatements(url, filter),
        async resetStatements() {
          await query(url, "select pg_stat_statements_reset()");
        },
        async setApplyDelay(ms: number) {
          await query(url, `alter system set recovery_min_apply_delay = '${Math.trunc(ms)}ms'`);
          await query(url, "select pg_reload_conf()");
          await until(
            async () =>
              (
                await query<{ ms: string }>(
                  url,
                  "select setting as ms from pg_settings where name = 'recovery_min_apply_delay'",
                )
              )[0]?.ms === String(Math.trunc(ms)),
            () => `${name}: recovery_min_apply_delay not reloaded`,
          );
        },
      };
      replicas.push(replica);
      await replica.start();
    }

    let current: EmbeddedDatabase = primary;
    const cluster: ReplicatedCluster = {
      primaryUrl,
      adminUrl,
      primaryPort,
      replicas,
      async waitCaughtUp() {
        const target = (await query<{ lsn: string }>(adminUrl, "select pg_current_wal_lsn()::text as lsn"))[0]
          ?.lsn;
        for (const replica of replicas) {
          if (!replica.running || replica.paused) continue;
          let seen = "";
          await until(
            async () => {
              const rows = await query<{ lsn: string | null; ok: boolean | null }>(
                replica.url,
                "select pg_last_wal_replay_lsn()::text as lsn, pg_last_wal_replay_lsn() >= $1::pg_lsn as ok",
                [target],
              );
              seen = rows[0]?.lsn ?? "none";
              return rows[0]?.ok === true;
            },
            () => `${replica.name} did not replay up to the primary's ${target} (replayed up to ${seen})`,
          );
        }
      },
      primaryStatements: (filter?: string) => countStatements(primaryUrl, filter),
      async resetPrimaryStatements() {
        await query(primaryUrl, "select pg_stat_statements_reset()");
      },
      async restartPrimary(downMs = 0) {
        await current.stop();
        if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
        current = await startEmbeddedPostgres({
          dataDir: primaryDir,
          database: DATABASE,
          logger,
          port: primaryPort,
        });
      },
      async stop() {
        for (const replica of replicas) await replica.stop();
        await current.stop();
        for (const dir of dirs) await fs.rm(dir, { recursive: true, force: true });
      },
    };
    return cluster;
  } catch (err) {
    for (const replica of replicas) await replica.stop().catch(() => undefined);
    await primary?.stop().catch(() => undefined);
    for (const dir of dirs) await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
    throw err;
  }
}
