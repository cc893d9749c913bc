import { Routine } from "@mikro-orm/core";

/**
 * `rate_limit_take(key, capacity, rate, want)`: takes up to `want` tokens from a shared token bucket in one
 * round trip, refilling it first from the database clock, so every instance sees one bucket whatever their
 * own clocks say. The foundation migration creates it; it is declared here so MikroORM's schema diff knows it
 * instead of proposing to drop it, and notices if the two drift apart (the body is compared, whitespace
 * aside; the `returns table (...)` columns are not: MikroORM compares only the word `table`). Never created
 * from here: MikroORM would wrap this `declare` block in another `begin … end`.
 */
export const RateLimitTake = new Routine({
  name: "rate_limit_take",
  type: "function",
  language: "plpgsql",
  params: {
    p_key: { type: "text", runtimeType: "string" },
    p_capacity: { type: "double precision", runtimeType: "number" },
    p_rate: { type: "double precision", runtimeType: "number" },
    p_want: { type: "integer", runtimeType: "number" },
  },
  returns: { runtimeType: "object", columnType: "table (granted integer, remaining double precision)" },
  body: `
      declare
        v_now timestamptz := clock_timestamp();
        v_tokens double precision;
      begin
        insert into rate_limit_buckets as b (bucket_key, tokens, refilled_at)
          values (p_key, p_capacity, v_now)
        on conflict (bucket_key) do update
          set tokens = least(p_capacity,
                             b.tokens + greatest(0, extract(epoch from (v_now - b.refilled_at))) * p_rate),
              refilled_at = v_now
        returning b.tokens into v_tokens;
        granted := greatest(0, least(p_want, floor(v_tokens)))::integer;
        remaining := v_tokens - granted;
        if granted > 0 then
          update rate_limit_buckets set tokens = remaining where bucket_key = p_key;
        end if;
        return next;
      end`,
});
