import type { ApiKeyService } from "../apikeys/api-key.service.ts";
import { type Clock, ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import type { Caller } from "../platform/tenancy.ts";
import {
  firstIdAt,
  type LoggedRow,
  REQUEST_LOG_DAYS,
  type RequestFilter,
  requestLogRepository as repo,
} from "./request-log.repository.ts";

/** A logged call, with the prefix of the key it was made with. */
export type LoggedCallView = LoggedRow & { api_key_prefix: string };

/** One page of the log. */
export interface RequestPage {
  requests: LoggedCallView[];
  hasMore: boolean;
  /** Where the next page starts (the last call shown, or the last looked at). */
  next: string;
}

/** Reading the request log of the caller's partner and environment (proto/partner/v1/requests.proto). */
export function createRequestLogService(o: { clock: Clock; apiKeys: ApiKeyService }) {
  const since = () => firstIdAt(new Date(o.clock.now().getTime() - REQUEST_LOG_DAYS * ms.day));
  /** Each row with its key's prefix: the partner's keys, one read. */
  const withPrefixes = async (em: Em, caller: Caller, rows: LoggedRow[]): Promise<LoggedCallView[]> => {
    if (!rows.length) return [];
    const prefixes = new Map((await o.apiKeys.list(em, caller.partnerId)).map((k) => [k.id, k.prefix]));
    return rows.map((r) => ({ ...r, api_key_prefix: prefixes.get(r.api_key_id) ?? "" }));
  };

  return {
    async list(
      em: Em,
      caller: Caller,
      filter: RequestFilter,
      limit: number,
      after: string | undefined,
    ): Promise<RequestPage> {
      const { rows, scannedTo } = await repo.page(em, caller, filter, { after, since: since(), limit });
      const shown = rows.slice(0, limit);
      const more = rows.length > limit || scannedTo !== undefined;
      const next = rows.length > limit ? (shown.at(-1)?.id ?? "") : (scannedTo ?? shown.at(-1)?.id ?? "");
      return { requests: await withPrefixes(em, caller, shown), hasMore: more, next: more ? next : "" };
    },

    async get(em: Em, caller: Caller, id: string): Promise<LoggedCallView> {
      const row = await repo.get(em, caller, id, since());
      if (!row) throw new ApiError("not_found", `No logged call ${id} in this environment.`);
      const [view] = await withPrefixes(em, caller, [row]);
      return view as LoggedCallView;
    },
  };
}

/** What {@link createRequestLogService} returns. */
export type RequestLogService = ReturnType<typeof createRequestLogService>;
