-- pgwork schema, version 10: hard timeouts, and a cancel that lost the race leaves a trace.
--
-- A handler that ignores cancellation held its job forever: heartbeats kept renewing the lease.
-- A job may now carry its own timeout (seconds; NULL: its handler's, or none), set at enqueue and
-- handed to the worker by the claim. The worker enforces it (pgwork.worker.watchdog): past it the
-- job fails through the fenced failure path and retries by its backoff. The bounds are held here
-- too, for rows written by plain SQL: above zero and at most seven days (beyond that a timeout is
-- a typo, milliseconds for seconds), never NaN or infinite.
--
-- A cancellation requested while a job ran, whose handler finished before a heartbeat told it,
-- used to vanish: succeed reset cancel_requested_at to NULL. The succeeded row now keeps it, and
-- a note in last_error says the request came too late, so `pgwork cancel` is never silently lost.

ALTER TABLE pgwork.jobs ADD COLUMN timeout_seconds double precision;
-- NOT VALID would skip the scan, but every existing row is NULL and the scan is one pass; a
-- validated constraint is what a reader of the schema expects.
ALTER TABLE pgwork.jobs ADD CONSTRAINT jobs_timeout_seconds_over_0_at_most_604800 CHECK (
    timeout_seconds IS NULL OR (timeout_seconds > 0 AND timeout_seconds <= 604800)
);

-- claim: version 7's statement unchanged, returning the job's timeout too. The result type
-- changes, so the function is dropped and created again (and granted again below).
DROP FUNCTION pgwork.claim(text, text[], integer, double precision, timestamptz);
CREATE FUNCTION pgwork.claim(
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
BEGIN
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

-- The note a succeeded row gets when a cancellation was requested while it ran (pure text;
-- SECURITY DEFINER as every pgwork function is, though it reads nothing).
CREATE FUNCTION pgwork.cancel_too_late(requested timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT '[cancel requested at '
           || to_char(requested AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
           || ' came too late: the handler had already finished, and its result was kept]'
$$;

-- succeed and succeed_many: as in version 2, except that a cancellation request is kept on the
-- succeeded row (cancel_requested_at, and the note above appended to last_error).
CREATE OR REPLACE FUNCTION pgwork.succeed(job_id bigint, token uuid, result jsonb, at timestamptz DEFAULT NULL)
RETURNS TABLE (fenced bigint, inserted bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    WITH held AS (
        UPDATE pgwork.jobs AS j
           SET status = 'succeeded',
               completed_at = now_,
               lease_token = NULL,
               lease_expires_at = NULL,
               last_error = CASE WHEN j.cancel_requested_at IS NULL THEN j.last_error
                                 ELSE right(coalesce(j.last_error || ' ', '') || pgwork.cancel_too_late(j.cancel_requested_at), 8000)
                            END
         WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
        RETURNING j.id, j.job_type, j.idempotency_key, j.lease_owner
    ), written AS (
        INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
        SELECT h.idempotency_key, h.id, h.job_type, h.lease_owner, result FROM held AS h
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM written);
END
$$;

CREATE OR REPLACE FUNCTION pgwork.succeed_many(job_ids bigint[], tokens uuid[], results jsonb[], at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint, inserted boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    WITH input AS (
        SELECT t.id, t.token, t.result FROM unnest(job_ids, tokens, results) AS t(id, token, result)
    ), held AS (
        UPDATE pgwork.jobs AS j
           SET status = 'succeeded',
               completed_at = now_,
               lease_token = NULL,
               lease_expires_at = NULL,
               last_error = CASE WHEN j.cancel_requested_at IS NULL THEN j.last_error
                                 ELSE right(coalesce(j.last_error || ' ', '') || pgwork.cancel_too_late(j.cancel_requested_at), 8000)
                            END
          FROM input AS i
         WHERE j.id = i.id AND j.lease_token = i.token AND j.status = 'running'
        RETURNING j.id, j.job_type, j.idempotency_key, j.lease_owner, i.result
    ), written AS (
        INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
        SELECT h.idempotency_key, h.id, h.job_type, h.lease_owner, h.result FROM held AS h ORDER BY h.id
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING job_id
    )
    SELECT h.id, EXISTS (SELECT 1 FROM written AS w WHERE w.job_id = h.id) FROM held AS h;
END
$$;

-- Grants: the claim again (the DROP took it from every role), and the new column to producers,
-- whose enqueue names it.
SELECT pgwork.add_profile_privilege('worker', 'EXECUTE ON FUNCTION pgwork.claim(text, text[], integer, double precision, timestamptz)');
SELECT pgwork.add_profile_privilege('producer', 'INSERT (timeout_seconds) ON pgwork.jobs');

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
