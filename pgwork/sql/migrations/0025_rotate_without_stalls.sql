-- pgwork schema: rotating the ready ring no longer stalls claims behind a large backlog.
-- rotate_ready: replaces 0023's.
--
-- 0023's rotate_ready took a segment's ACCESS EXCLUSIVE lock first and then counted its live rows
-- with a join on jobs: with a backlog of 200,000 pending jobs in an older segment each call held
-- every claim back for 40-90 ms (measured on PostgreSQL 15) only to report 'full', every few
-- seconds, and the stall grew with the backlog. Now:
--   * rows are counted before any table lock, and only up to 10 x move_limit + 1 (a bounded read);
--   * a segment holding more than 10 x move_limit rows is a backlog: left alone, unlocked ('full'),
--     until the claims drain it (moving it forward would chase it round the ring for ever);
--   * a segment holding more than move_limit rows (future-dated jobs, a small backlog) is thinned:
--     move_limit of its rows move to the current segment under row locks taken with SKIP LOCKED
--     (claims go on beside it), and a later call truncates it once few enough are left ('thinned');
--   * the table lock is taken, as before for at most 20 ms of waiting, only for a segment small
--     enough to be moved in one bounded step, and that step is counted bounded again under it.
-- The default move_limit is 1,000: the locked step then moves at most a thousand rows.

CREATE OR REPLACE FUNCTION pgwork.rotate_ready(at timestamptz DEFAULT NULL, move_limit integer DEFAULT 1000)
RETURNS TABLE (segment smallint, outcome text, moved integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    current_ smallint := pgwork.ready_segment(now_);
    part regclass;
    rows_ integer;
    saved_timeout text;
BEGIN
    -- 'pgwork.ready' as a 64-bit key: one rotation at a time, never a leader.
    IF NOT pg_try_advisory_xact_lock(hashtextextended('pgwork.rotate_ready', 0)) THEN
        RETURN;
    END IF;
    saved_timeout := current_setting('lock_timeout');
    FOR s IN 0..7 LOOP
        CONTINUE WHEN s = current_;
        part := format('pgwork.%I', 'ready_' || s)::regclass;
        -- A truncated segment no one wrote to since has no heap pages: nothing to do.
        CONTINUE WHEN pg_relation_size(part) = 0;
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %s AS r LIMIT $1) AS x', part)
           INTO rows_ USING 10 * move_limit + 1;
        IF rows_ > 10 * move_limit THEN
            segment := s; outcome := 'full'; moved := 0;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF rows_ > move_limit THEN
            -- Move a bounded share forward without locking the segment. Stale rows (a job no
            -- longer pending) move too; the claim that meets one drops it.
            EXECUTE format(
                'WITH gone AS (
                     DELETE FROM %1$s AS r
                      WHERE r.ctid = ANY (ARRAY(SELECT c.ctid FROM %1$s AS c LIMIT $2 FOR UPDATE SKIP LOCKED))
                     RETURNING r.job_id, r.job_type, r.priority, r.available_at)
                 INSERT INTO pgwork.ready (segment, job_id, job_type, priority, available_at)
                 SELECT $1, g.job_id, g.job_type, g.priority, g.available_at FROM gone AS g', part)
              USING current_, move_limit;
            GET DIAGNOSTICS rows_ = ROW_COUNT;
            segment := s; outcome := 'thinned'; moved := rows_;
            RETURN NEXT;
            CONTINUE;
        END IF;
        PERFORM set_config('lock_timeout', '20ms', true);
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', part);
        EXCEPTION WHEN lock_not_available OR query_canceled THEN
            PERFORM set_config('lock_timeout', saved_timeout, true);
            segment := s; outcome := 'busy'; moved := 0;
            RETURN NEXT;
            CONTINUE;
        END;
        PERFORM set_config('lock_timeout', saved_timeout, true);
        -- Under the lock no claim, enqueue or cancel touches this segment until commit. A
        -- transaction that began in this segment's period may still have added rows since the
        -- count: counted again, bounded, before moving.
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %s AS r LIMIT $1) AS x', part)
           INTO rows_ USING move_limit + 1;
        IF rows_ > move_limit THEN
            segment := s; outcome := 'busy'; moved := 0;  -- rows arrived since the count: next call
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- Live rows to the current segment; rows whose job is not pending (stale) are dropped.
        EXECUTE format(
            'INSERT INTO pgwork.ready (segment, job_id, job_type, priority, available_at)
             SELECT $1, r.job_id, r.job_type, r.priority, r.available_at
               FROM %s AS r JOIN pgwork.jobs AS j ON j.id = r.job_id AND j.status = ''pending''', part)
          USING current_;
        GET DIAGNOSTICS rows_ = ROW_COUNT;
        EXECUTE format('TRUNCATE %s', part);
        segment := s; outcome := 'truncated'; moved := rows_;
        RETURN NEXT;
    END LOOP;
END
$$;
