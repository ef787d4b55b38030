-- pgwork schema: a claim never waits on another session's lock on a limit row.
--
-- claim_limited: replaces 0011's. Until now it locked the limit rows of the types asked for with a
-- plain FOR UPDATE: a session holding one (a worker that claimed a limited type inside a
-- transaction it left open, stuck or hostile) froze every claim that included that type, even
-- claims for several types where the others are unlimited. Now each limit row is waited for at
-- most 5 ms (another claim holds it for about a millisecond); past that the type is skipped for
-- this claim, the other types are claimed as before, and a NOTICE (SQLSTATE PW001, the type in
-- DETAIL) lets the client count it. lock_timeout is set for the lock loop only and put back, so
-- the caller's own setting holds for the rest of its transaction. pgwork.claim is unchanged.

CREATE OR REPLACE FUNCTION pgwork.claim_limited(job_types text[], max_jobs integer, now_ timestamptz)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    wanted text[];
    chosen bigint[];
    skipped text[] := '{}';
    limited text;
    saved_timeout text;
    -- Long enough for a claim's own lock (held for the claim's milliseconds) to be waited for.
    lock_wait constant text := '5ms';
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgwork: a claim that may take a limited job type must run at READ COMMITTED, not %',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'claim in a transaction of its own (Queue.claim without conn) or SET TRANSACTION ISOLATION LEVEL READ COMMITTED';
    END IF;
    IF job_types IS NULL THEN
        -- Any type: the types with a pending job, skipping from one to the next on
        -- jobs_claim_type_idx (a few buffers per type), so each gets its own bounded scan and a
        -- blocked type's backlog is never read past.
        wanted := ARRAY(
            WITH RECURSIVE t(name) AS (
                SELECT min(c.job_type) FROM pgwork.jobs AS c WHERE c.status = 'pending'
                UNION ALL
                SELECT (SELECT min(c.job_type) FROM pgwork.jobs AS c WHERE c.status = 'pending' AND c.job_type > t.name)
                  FROM t WHERE t.name IS NOT NULL
            )
            SELECT t.name FROM t WHERE t.name IS NOT NULL);
    ELSE
        wanted := ARRAY(SELECT DISTINCT u.name FROM unnest(job_types) AS u(name) WHERE u.name IS NOT NULL);
    END IF;

    -- 1. The limited types' rows, locked in type order; held until the claim commits. A row another
    -- session holds for longer than lock_wait (a claim in an open transaction, a stuck or hostile
    -- worker) is not waited for: its type is left out of this claim, the others are claimed, and a
    -- NOTICE tells the client (the worker counts it in pgwork_claim_limit_skipped_total). Each try
    -- is a subtransaction only so that a timeout can be caught; a lock taken is kept by the claim.
    saved_timeout := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', lock_wait, true);
    FOR limited IN SELECT l.job_type FROM pgwork.job_limits AS l WHERE l.job_type = ANY (wanted) ORDER BY l.job_type
    LOOP
        BEGIN
            PERFORM 1 FROM pgwork.job_limits AS l WHERE l.job_type = limited FOR UPDATE;
        EXCEPTION WHEN lock_not_available OR query_canceled THEN
            -- query_canceled too: a lock timeout that fires as the lock is granted can surface as
            -- "canceling statement due to user request" (the timeout's indicator is cleared with
            -- the timer), seen under load with 16 claimers; either way the row was not had in time.
            skipped := skipped || limited;
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', saved_timeout, true);
    IF skipped <> '{}' THEN
        wanted := ARRAY(SELECT w.name FROM unnest(wanted) AS w(name) WHERE w.name <> ALL (skipped));
        FOREACH limited IN ARRAY skipped LOOP
            RAISE NOTICE USING MESSAGE = 'pgwork: claim skipped a limited job type locked by another session',
                               DETAIL = limited, ERRCODE = 'PW001';
        END LOOP;
    END IF;

    -- 2. A new statement, so a snapshot taken after the locks: counts include every claim before.
    WITH lim AS (
        SELECT l.job_type,
               CASE WHEN l.rate_count IS NOT NULL THEN
                   least(l.rate_count::double precision,
                         l.tokens + greatest(extract(epoch FROM now_ - l.refilled_at), 0) * l.rate_count / l.rate_seconds)
               END AS tokens,
               l.max_running - (SELECT count(*) FROM pgwork.jobs AS r
                                 WHERE r.status = 'running' AND r.job_type = l.job_type) AS free
          FROM pgwork.job_limits AS l
         WHERE l.job_type = ANY (wanted)
    ), allowed AS (
        SELECT w.name,
               greatest(0, least(max_jobs, coalesce(m.free, max_jobs), coalesce(floor(m.tokens), max_jobs)))::integer AS n
          FROM unnest(wanted) AS w(name) LEFT JOIN lim AS m ON m.job_type = w.name
    ), picked AS (
        SELECT k.id, k.job_type
          FROM (SELECT t.id, t.job_type, t.priority, t.available_at
                  FROM allowed AS a,
                       LATERAL (SELECT c.id, c.job_type, c.priority, c.available_at FROM pgwork.jobs AS c
                                 WHERE c.status = 'pending'
                                   AND c.job_type = a.name
                                   AND c.available_at <= now_
                                 ORDER BY c.priority, c.available_at, c.id
                                 LIMIT a.n
                                   FOR UPDATE SKIP LOCKED) AS t) AS k
         ORDER BY k.priority, k.available_at, k.id
         LIMIT max_jobs
    ), spent AS (
        UPDATE pgwork.job_limits AS l
           SET tokens = greatest(m.tokens - (SELECT count(*) FROM picked AS p WHERE p.job_type = l.job_type), 0),
               refilled_at = greatest(l.refilled_at, now_)
          FROM lim AS m
         WHERE l.job_type = m.job_type AND m.tokens IS NOT NULL
    )
    SELECT array_agg(p.id) INTO chosen FROM picked AS p;
    RETURN coalesce(chosen, ARRAY[]::bigint[]);
END
$$;
