import { currentIds } from "./telemetry.ts";

/** Log levels, most verbose first. */
export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** Structured fields of a log line. Never put secrets, keys, phone numbers or bodies here. */
export type LogFields = Record<string, unknown>;

/** A structured JSON-lines logger. `child` binds fields (such as the request id) to every line. */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
  readonly level: LogLevel;
}

/** Options for {@link createLogger}. */
export interface LoggerOptions {
  /** Lines below this level are dropped. */
  level: LogLevel;
  /** Where lines go; stdout by default. */
  write?: (line: string) => void;
  /** Fields on every line. */
  bindings?: LogFields;
}

function serialiseError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const out: Record<string, unknown> = { name: err.name, message: err.message, stack: err.stack };
  if ("code" in err) out.code = (err as { code: unknown }).code;
  if (err.cause !== undefined) out.cause = serialiseError(err.cause);
  return out;
}

/** Creates a logger writing one JSON object per line. */
export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const min = rank[options.level];
  const bindings = options.bindings ?? {};
  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (rank[level] < min) return;
    const line: LogFields = { time: new Date().toISOString(), level, msg, ...bindings };
    // With tracing on, a line written inside a span names it: the trace an operator follows from the line.
    const ids = currentIds();
    if (ids) Object.assign(line, ids);
    if (fields) for (const [k, v] of Object.entries(fields)) line[k] = k === "err" ? serialiseError(v) : v;
    write(JSON.stringify(line));
  };
  return {
    level: options.level,
    debug: (msg, fields) => emit("debug", msg, fields),
    info: (msg, fields) => emit("info", msg, fields),
    warn: (msg, fields) => emit("warn", msg, fields),
    error: (msg, fields) => emit("error", msg, fields),
    child: (fields) => createLogger({ ...options, write, bindings: { ...bindings, ...fields } }),
  };
}
