-- pgwork schema: periodic jobs (schedules), each tick enqueued exactly once. Replaces nothing:
-- two new tables and two new functions.
--
-- A scheduler (the operator, for a JobQueue's spec.schedules; a worker, for @app.periodic) fires a
-- schedule in one short transaction:
--   1. pgwork.schedule_open upserts the schedule's row, which locks it until commit, and returns
--      its watermark: every tick at or before it has been decided (enqueued or skipped). A row
--      seen for the first time gets the caller's `now` as watermark: a schedule starts with its
--      first tick after it was first seen.
--   2. the scheduler computes, in Python (pgwork.crontab), the ticks in (watermark, now] and which
--      of them to enqueue (the `missed` policy), and calls pgwork.schedule_fire, which records
--      each tick in schedule_ticks (primary key (schedule, tick_at)), enqueues one job per tick
--      it recorded, and moves the watermark to `now` (never backwards).
-- Exactly once: a tick is enqueued only by the statement that inserted its schedule_ticks row,
-- and that primary key takes each (schedule, tick) once, whatever the number of schedulers, their
-- clocks or their restarts; the row lock only keeps two schedulers' first sight from racing (no
-- leader is elected, no scheduler waits on another for longer than that transaction). The job's
-- idempotency key carries the tick: 'schedule:<name>:<tick, UTC, ISO 8601>'.

CREATE TABLE pgwork.schedules (
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    cron text NOT NULL CHECK (length(cron) BETWEEN 1 AND 200),
    time_zone text NOT NULL CHECK (length(time_zone) BETWEEN 1 AND 100),
    job_type text NOT NULL,
    missed text NOT NULL CHECK (missed IN ('skip', 'catchUp')),
    watermark timestamptz NOT NULL,
    last_tick timestamptz,
    last_job_id bigint,
    next_tick timestamptz,
    skipped_ticks bigint NOT NULL DEFAULT 0,
    fired_at timestamptz NOT NULL,
    CONSTRAINT schedules_pkey PRIMARY KEY (name)
);

CREATE TABLE pgwork.schedule_ticks (
    schedule text NOT NULL,
    tick_at timestamptz NOT NULL,
    job_id bigint NOT NULL,
    CONSTRAINT schedule_ticks_pkey PRIMARY KEY (schedule, tick_at)
);

CREATE FUNCTION pgwork.schedule_open(
    name text, cron text, time_zone text, job_type text, missed text, now_ timestamptz
) RETURNS TABLE (watermark timestamptz, last_tick timestamptz, now_at timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    INSERT INTO pgwork.schedules AS s (name, cron, time_zone, job_type, missed, watermark, fired_at)
    VALUES (schedule_open.name, schedule_open.cron, schedule_open.time_zone, schedule_open.job_type,
            schedule_open.missed, coalesce(now_, clock_timestamp()), coalesce(now_, clock_timestamp()))
    ON CONFLICT ON CONSTRAINT schedules_pkey DO UPDATE
       SET cron = EXCLUDED.cron, time_zone = EXCLUDED.time_zone, job_type = EXCLUDED.job_type,
           missed = EXCLUDED.missed
    RETURNING s.watermark, s.last_tick, coalesce(now_, clock_timestamp());
$$;
SELECT pgwork.add_profile_privilege(
    'producer', 'EXECUTE ON FUNCTION pgwork.schedule_open(text, text, text, text, text, timestamptz)');

-- Records and enqueues `ticks` (each once), moves the watermark to `until` and counts `skipped`
-- ticks passed over. Returns (tick, job id) for the ticks this call enqueued.
CREATE FUNCTION pgwork.schedule_fire(
    name text, ticks timestamptz[], until timestamptz, next_tick timestamptz, skipped integer,
    job_type text, payload jsonb, priority smallint, max_attempts smallint
) RETURNS TABLE (tick_at timestamptz, job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
DECLARE
    tick timestamptz;
    new_id bigint;
BEGIN
    FOREACH tick IN ARRAY coalesce(ticks, '{}') LOOP
        -- The key of the tick first (it may already be taken), then the job.
        INSERT INTO pgwork.schedule_ticks AS t (schedule, tick_at, job_id)
        VALUES (schedule_fire.name, tick, 0)
        ON CONFLICT ON CONSTRAINT schedule_ticks_pkey DO NOTHING;
        CONTINUE WHEN NOT FOUND;
        INSERT INTO pgwork.jobs AS j (job_type, payload, priority, max_attempts, available_at, idempotency_key)
        VALUES (schedule_fire.job_type, schedule_fire.payload, schedule_fire.priority, schedule_fire.max_attempts,
                tick, 'schedule:' || schedule_fire.name || ':'
                      || to_char(tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
        RETURNING j.id INTO new_id;
        UPDATE pgwork.schedule_ticks AS t SET job_id = new_id
         WHERE t.schedule = schedule_fire.name AND t.tick_at = tick;
        tick_at := tick;
        job_id := new_id;
        RETURN NEXT;
    END LOOP;
    UPDATE pgwork.schedules AS s
       SET watermark = greatest(s.watermark, until),
           last_tick = CASE WHEN f.tick IS NOT NULL AND (s.last_tick IS NULL OR f.tick > s.last_tick)
                            THEN f.tick ELSE s.last_tick END,
           last_job_id = CASE WHEN f.tick IS NOT NULL AND (s.last_tick IS NULL OR f.tick > s.last_tick)
                              THEN f.job ELSE s.last_job_id END,
           -- A scheduler whose clock runs behind the watermark leaves the next tick as it is.
           next_tick = CASE WHEN until >= s.watermark THEN schedule_fire.next_tick ELSE s.next_tick END,
           skipped_ticks = s.skipped_ticks + greatest(skipped, 0),
           fired_at = clock_timestamp()
      FROM (SELECT max(t.tick_at) AS tick,
                   (array_agg(t.job_id ORDER BY t.tick_at DESC))[1] AS job
              FROM pgwork.schedule_ticks AS t
             WHERE t.schedule = schedule_fire.name AND t.tick_at = ANY (coalesce(ticks, '{}'))) AS f
     WHERE s.name = schedule_fire.name;
    -- A week of ticks is kept (the watermark, not these rows, decides what is due; the rows are
    -- the unique key that a scheduler with a stale watermark would run into).
    DELETE FROM pgwork.schedule_ticks AS t
     WHERE t.schedule = schedule_fire.name AND t.tick_at < until - interval '7 days';
END
$$;
SELECT pgwork.add_profile_privilege(
    'producer',
    'EXECUTE ON FUNCTION pgwork.schedule_fire(text, timestamptz[], timestamptz, timestamptz, integer, text, jsonb, '
    || 'smallint, smallint)');
SELECT pgwork.add_profile_privilege('reader', 'SELECT ON pgwork.schedules');

REVOKE ALL ON pgwork.schedules, pgwork.schedule_ticks FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
