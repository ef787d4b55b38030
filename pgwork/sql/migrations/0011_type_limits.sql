-- pgwork schema, version 11: per-type limits across the fleet, enforced in the claim.
--
-- A job type that calls a paid API or a shared GPU needs a fleet-wide bound: at most max_running
-- of its jobs running at once across all workers, and at most rate_count claims per rate_seconds
-- (a token bucket). One row per limited type in pgwork.job_limits, set by the maintainer profile
-- through pgwork.set_limit / pgwork.clear_limit; types with no row keep the claim of version 7,
-- unchanged and planned as before (the only extra work is one probe of this small table).
--
-- How the running limit holds under concurrency. No counter: a claim that may take a limited type
--   1. locks that type's job_limits row (FOR UPDATE, several types in job_type order, so two
--      claims never deadlock), then
--   2. in a NEW statement, so under a snapshot taken after the lock was granted, counts the
--      type's running jobs (jobs_running_idx now leads with the type) and claims at most
--      max_running minus that count.
-- Every claimer of the type waits on the same row lock, and the previous holder's claimed rows
-- commit in the same instant its lock goes, so the count each claimer sees includes every claim
-- before it. (Counting in the statement that waited for the lock would not: under READ COMMITTED
-- a statement keeps the snapshot it started with, and would miss the claims that committed while
-- it waited.) A job that leaves running while a claimer counts is counted as still running: the
-- error is always on the safe side. The claim therefore refuses to run at REPEATABLE READ or
-- SERIALIZABLE, where step 2 would reuse an old snapshot.
-- Why not a counter on the limits row (running = running + n, guarded, and a decrement on every
-- way out of running): every transition out of running (succeed, succeed_many, set_state_if_held,
-- fail_many, release, acknowledge_cancel, reap, and the ones later versions add, such as hard
-- timeouts) would have to keep it, or a trigger on every status change would, for every type;
-- a finisher would then lock the limits row until it commits, serialising finishes behind claims
-- and deadlocking a batch of finishes over two limited types against a claim over both; and a
-- counter can drift (a row set running by hand, a bug in one path) with nothing to bring it back.
-- Counting has nothing to keep consistent: a reaped job's slot comes back because the job is no
-- longer running. Its cost is one index range per limited type, as long as the type's running jobs.
--
-- The rate: tokens and refilled_at on the same row, refilled at rate_count per rate_seconds up
-- to rate_count and spent by the claim while it holds the lock. Over any span of T seconds at
-- most rate_count + rate_count x T / rate_seconds claims of the type succeed (a full bucket, then
-- the refill); sustained, rate_count per rate_seconds.
--
-- A limit applies to every claim that starts after it commits: creating one takes an ACCESS
-- EXCLUSIVE lock on job_limits (every claim reads it, holding ACCESS SHARE until it commits), so
-- it waits out the claims that saw no limit and holds back new ones for the few milliseconds of
-- the insert; a claim that started without the limit can never run beside one counting under it.
-- Changing or clearing an existing limit needs no such lock (claims of the type hold its row).
-- Jobs already running when a limit is set or lowered keep running; no new claim starts until the
-- type is below it.
--
-- Any path that sets jobs running must go through pgwork.claim (or pgwork.claim_limited): a copy
-- of the claim statement elsewhere would bypass the limits.

CREATE TABLE pgwork.job_limits (
    job_type     text PRIMARY KEY,
    max_running  integer,
    rate_count   integer,
    rate_seconds double precision,
    tokens       double precision NOT NULL DEFAULT 0,
    refilled_at  timestamptz      NOT NULL DEFAULT now(),
    updated_at   timestamptz      NOT NULL DEFAULT now(),
    CONSTRAINT job_limits_job_type_shape CHECK (length(job_type) BETWEEN 1 AND 200),
    CONSTRAINT job_limits_max_running_range CHECK (max_running IS NULL OR max_running BETWEEN 1 AND 1000000),
    CONSTRAINT job_limits_rate_count_range CHECK (rate_count IS NULL OR rate_count BETWEEN 1 AND 1000000),
    CONSTRAINT job_limits_rate_seconds_range CHECK (rate_seconds IS NULL OR rate_seconds BETWEEN 1 AND 86400),
    CONSTRAINT job_limits_rate_whole CHECK ((rate_count IS NULL) = (rate_seconds IS NULL)),
    CONSTRAINT job_limits_some_limit CHECK (max_running IS NOT NULL OR rate_count IS NOT NULL),
    CONSTRAINT job_limits_tokens_range CHECK (tokens >= 0 AND (rate_count IS NULL OR tokens <= rate_count))
);

-- The jobs in flight by type first: the limited claim counts one type's running jobs. Same name
-- and same rows as version 4's (lease_owner) index, so one index still serves the reaper, the
-- jobs per pod and the backlog reading; neither column is written by a heartbeat, so renewals
-- stay HOT. Built in the migration's transaction: it holds only the jobs in flight.
DROP INDEX pgwork.jobs_running_idx;
CREATE INDEX jobs_running_idx ON pgwork.jobs (job_type, lease_owner) WHERE status = 'running';

-- claim_limited: the ids a claim for `job_types` (NULL: any type) may take now, locked (FOR
-- UPDATE SKIP LOCKED) and within every limit, with the tokens spent; called by pgwork.claim
-- when some limit applies, which then marks them running in the same transaction. Not granted
-- to anyone: pgwork.claim calls it (as the owner; SECURITY DEFINER like every job-life function).
CREATE FUNCTION pgwork.claim_limited(job_types text[], max_jobs integer, now_ timestamptz)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    wanted text[];
    chosen bigint[];
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

    -- 1. The limited types' rows, locked in type order; held until the claim commits.
    PERFORM 1 FROM pgwork.job_limits AS l WHERE l.job_type = ANY (wanted) ORDER BY l.job_type FOR UPDATE;

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

-- claim: as in version 7 when no limit applies to the types asked for (the last statement, which
-- claim_statement reads back and the plan tests EXPLAIN). When one does, claim_limited chooses
-- and locks the ids and the same UPDATE marks them; the two UPDATEs must set and return the same
-- columns (a later version that adds a column to the claim changes both).
CREATE OR REPLACE FUNCTION pgwork.claim(
    owner text, job_types text[], max_jobs integer, lease_seconds double precision, at timestamptz DEFAULT NULL
) RETURNS TABLE (
    id bigint, job_type text, payload jsonb, priority smallint, attempt_count smallint, max_attempts smallint,
    idempotency_key text, trace_context jsonb, lease_owner text, lease_token uuid,
    lease_expires_at timestamptz, created_at timestamptz, last_error text, timeout_seconds double precision
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    chosen bigint[];
BEGIN
    IF EXISTS (SELECT 1 FROM pgwork.job_limits AS l WHERE job_types IS NULL OR l.job_type = ANY (job_types)) THEN
        chosen := pgwork.claim_limited(job_types, max_jobs, now_);
        RETURN QUERY
        UPDATE pgwork.jobs AS j
           SET status = 'running',
               started_at = now_,
               attempt_count = j.attempt_count + 1,
               lease_owner = owner,
               lease_token = gen_random_uuid(),
               lease_expires_at = now_ + make_interval(secs => lease_seconds),
               heartbeat_at = now_,
               cancel_requested_at = NULL
         WHERE j.id = ANY (chosen)
        RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
                  j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
                  j.created_at, j.last_error, j.timeout_seconds;
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'running',
           started_at = now_,
           attempt_count = j.attempt_count + 1,
           lease_owner = owner,
           lease_token = gen_random_uuid(),
           lease_expires_at = now_ + make_interval(secs => lease_seconds),
           heartbeat_at = now_,
           cancel_requested_at = NULL
     WHERE j.id = ANY (ARRAY(
            SELECT k.id
              FROM (SELECT a.id, a.priority, a.available_at
                      FROM (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                             WHERE job_types IS NULL
                               AND c.status = 'pending'
                               AND c.available_at <= now_
                             ORDER BY c.priority, c.available_at, c.id
                             LIMIT max_jobs
                               FOR UPDATE SKIP LOCKED) AS a
                    UNION ALL
                    SELECT t.id, t.priority, t.available_at
                      FROM (SELECT DISTINCT u.name FROM unnest(job_types) AS u(name)) AS w,
                           LATERAL (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                                     WHERE c.status = 'pending'
                                       AND c.job_type = w.name
                                       AND c.available_at <= now_
                                     ORDER BY c.priority, c.available_at, c.id
                                     LIMIT max_jobs
                                       FOR UPDATE SKIP LOCKED) AS t) AS k
             ORDER BY k.priority, k.available_at, k.id
             LIMIT max_jobs))
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error, j.timeout_seconds;
END
$$;

-- set_limit: the type's whole limit (a NULL field: no such limit), replacing what it had (true
-- when the type had none); the
-- bucket starts full, or keeps what it holds (up to the new size) when the type had a rate.
-- Each bad value is refused with the field and the fix; the CHECK constraints say the same to
-- anyone writing the table directly. lock_timeout bounds the wait for the claims in flight when
-- a new limit is created (see the header).
CREATE FUNCTION pgwork.set_limit(
    job_type text, max_running integer, rate_count integer, rate_seconds double precision, at timestamptz DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp SET lock_timeout = '5s' AS $$
#variable_conflict use_variable
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    created boolean;
BEGIN
    IF job_type IS NULL OR length(job_type) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'pgwork: job_type must be 1 to 200 characters; name the job type the limit is for'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_running IS NOT NULL AND max_running NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'pgwork: max_running must be 1 to 1000000, not %; to lift it, pass NULL (no running limit)', max_running
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (rate_count IS NULL) <> (rate_seconds IS NULL) THEN
        RAISE EXCEPTION 'pgwork: a rate needs both rate_count and rate_seconds (e.g. 60 and 60 for 60 a minute), or neither'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rate_count IS NOT NULL AND rate_count NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'pgwork: rate_count must be 1 to 1000000 claims per period, not %; to lift the rate, pass NULL', rate_count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rate_seconds IS NOT NULL AND NOT (rate_seconds BETWEEN 1 AND 86400) THEN
        RAISE EXCEPTION 'pgwork: rate_seconds (the period) must be 1 to 86400 seconds, not %', rate_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_running IS NULL AND rate_count IS NULL THEN
        RAISE EXCEPTION 'pgwork: give max_running or a rate; to remove the type''s limit use pgwork.clear_limit'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    created := NOT EXISTS (SELECT 1 FROM pgwork.job_limits AS l WHERE l.job_type = job_type);
    IF created THEN
        BEGIN
            LOCK TABLE pgwork.job_limits IN ACCESS EXCLUSIVE MODE;
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION 'pgwork: could not create the limit: claims held pgwork.job_limits for 5 s; try again'
                USING ERRCODE = 'lock_not_available';
        END;
    END IF;
    INSERT INTO pgwork.job_limits AS l (job_type, max_running, rate_count, rate_seconds, tokens, refilled_at, updated_at)
    VALUES (job_type, max_running, rate_count, rate_seconds, coalesce(rate_count, 0), now_, now_)
    ON CONFLICT ON CONSTRAINT job_limits_pkey DO UPDATE
       SET max_running = EXCLUDED.max_running,
           rate_count = EXCLUDED.rate_count,
           rate_seconds = EXCLUDED.rate_seconds,
           tokens = CASE WHEN EXCLUDED.rate_count IS NULL THEN 0
                         WHEN l.rate_count IS NULL THEN EXCLUDED.rate_count
                         ELSE least(EXCLUDED.rate_count::double precision,
                                    l.tokens + greatest(extract(epoch FROM now_ - l.refilled_at), 0)
                                               * l.rate_count / l.rate_seconds) END,
           refilled_at = now_,
           updated_at = now_;
    RETURN created;
END
$$;

-- clear_limit: the type goes back to the unlimited claim. True if it had a limit.
CREATE FUNCTION pgwork.clear_limit(job_type text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    DELETE FROM pgwork.job_limits AS l WHERE l.job_type = job_type;
    RETURN FOUND;
END
$$;

-- limits: every limit with the type's running jobs and the tokens its bucket holds now (a reader
-- question: `pgwork limits show`, `pgwork stats`, the operator's poll).
CREATE FUNCTION pgwork.limits(at timestamptz DEFAULT now())
RETURNS TABLE (
    job_type text, max_running integer, rate_count integer, rate_seconds double precision, running bigint,
    tokens double precision
) LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT l.job_type, l.max_running, l.rate_count, l.rate_seconds,
           (SELECT count(*) FROM pgwork.jobs AS r WHERE r.status = 'running' AND r.job_type = l.job_type),
           CASE WHEN l.rate_count IS NOT NULL THEN
               least(l.rate_count::double precision,
                     l.tokens + greatest(extract(epoch FROM at - l.refilled_at), 0) * l.rate_count / l.rate_seconds)
           END
      FROM pgwork.job_limits AS l
     ORDER BY l.job_type;
END
$$;

-- Limits for every reader (stats and the operator's poll show them); setting them is the
-- maintainer's. claim_limited is granted to no one: pgwork.claim calls it as the owner.
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.limits(timestamptz)');
SELECT pgwork.add_profile_privilege(
    'maintainer', 'EXECUTE ON FUNCTION pgwork.set_limit(text, integer, integer, double precision, timestamptz)');
SELECT pgwork.add_profile_privilege('maintainer', 'EXECUTE ON FUNCTION pgwork.clear_limit(text)');

REVOKE ALL ON pgwork.job_limits FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
