-- Variants of the job-life functions for scripts/claim_cost.py: each drops one cost of the
-- version-12 functions, so the script can price that cost alone. Not a migration: the script
-- installs them as pgwork.cc_<variant> in a scratch database and drops the database after.
-- A *_signature block is what follows the function's name; a *_body block what stands between
-- its `AS $$` and `$$`; the script writes the header (language, SECURITY DEFINER, SET clauses).

-- name: claim_signature
(owner text, job_types text[], max_jobs integer, lease_seconds double precision, at timestamptz DEFAULT NULL)
RETURNS TABLE (
    id bigint, job_type text, payload jsonb, priority smallint, attempt_count smallint, max_attempts smallint,
    idempotency_key text, trace_context jsonb, lease_owner text, lease_token uuid,
    lease_expires_at timestamptz, created_at timestamptz, last_error text, timeout_seconds double precision,
    checkpoint jsonb
)

-- name: succeed_signature
(job_ids bigint[], tokens uuid[], results jsonb[], at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint, inserted boolean)

-- name: claim_v12
-- Version 12's claim, word for word: the limits probe, both arms in one UNION ALL.
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    chosen bigint[];
BEGIN
    IF EXISTS (SELECT 1 FROM pgwork.job_limits AS l WHERE job_types IS NULL OR l.job_type = ANY (job_types)) THEN
        chosen := pgwork.claim_limited(job_types, max_jobs, now_);
        RETURN QUERY
        UPDATE pgwork.jobs AS j
           SET status = 'running', started_at = now_, attempt_count = j.attempt_count + 1, lease_owner = owner,
               lease_token = gen_random_uuid(), lease_expires_at = now_ + make_interval(secs => lease_seconds),
               heartbeat_at = now_, cancel_requested_at = NULL, progress = NULL, progress_note = NULL,
               progress_at = NULL
         WHERE j.id = ANY (chosen)
        RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
                  j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
                  j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'running', started_at = now_, attempt_count = j.attempt_count + 1, lease_owner = owner,
           lease_token = gen_random_uuid(), lease_expires_at = now_ + make_interval(secs => lease_seconds),
           heartbeat_at = now_, cancel_requested_at = NULL, progress = NULL, progress_note = NULL,
           progress_at = NULL
     WHERE j.id = ANY (ARRAY(
            SELECT k.id
              FROM (SELECT a.id, a.priority, a.available_at
                      FROM (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                             WHERE job_types IS NULL AND c.status = 'pending' AND c.available_at <= now_
                             ORDER BY c.priority, c.available_at, c.id
                             LIMIT max_jobs
                               FOR UPDATE SKIP LOCKED) AS a
                    UNION ALL
                    SELECT t.id, t.priority, t.available_at
                      FROM (SELECT DISTINCT u.name FROM unnest(job_types) AS u(name)) AS w,
                           LATERAL (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                                     WHERE c.status = 'pending' AND c.job_type = w.name AND c.available_at <= now_
                                     ORDER BY c.priority, c.available_at, c.id
                                     LIMIT max_jobs
                                       FOR UPDATE SKIP LOCKED) AS t) AS k
             ORDER BY k.priority, k.available_at, k.id
             LIMIT max_jobs))
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
END

-- name: claim_noprobe
-- Version 12's unlimited arm alone: no EXISTS probe of pgwork.job_limits (breaks the limits).
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'running', started_at = now_, attempt_count = j.attempt_count + 1, lease_owner = owner,
           lease_token = gen_random_uuid(), lease_expires_at = now_ + make_interval(secs => lease_seconds),
           heartbeat_at = now_, cancel_requested_at = NULL, progress = NULL, progress_note = NULL,
           progress_at = NULL
     WHERE j.id = ANY (ARRAY(
            SELECT k.id
              FROM (SELECT a.id, a.priority, a.available_at
                      FROM (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                             WHERE job_types IS NULL AND c.status = 'pending' AND c.available_at <= now_
                             ORDER BY c.priority, c.available_at, c.id
                             LIMIT max_jobs
                               FOR UPDATE SKIP LOCKED) AS a
                    UNION ALL
                    SELECT t.id, t.priority, t.available_at
                      FROM (SELECT DISTINCT u.name FROM unnest(job_types) AS u(name)) AS w,
                           LATERAL (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                                     WHERE c.status = 'pending' AND c.job_type = w.name AND c.available_at <= now_
                                     ORDER BY c.priority, c.available_at, c.id
                                     LIMIT max_jobs
                                       FOR UPDATE SKIP LOCKED) AS t) AS k
             ORDER BY k.priority, k.available_at, k.id
             LIMIT max_jobs))
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
END

-- name: claim_ifarm
-- The probe kept, the arm chosen in plpgsql with IF instead of a UNION ALL.
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    IF EXISTS (SELECT 1 FROM pgwork.job_limits AS l WHERE job_types IS NULL OR l.job_type = ANY (job_types)) THEN
        RAISE EXCEPTION 'claim_cost: the variants do not take limited types';
    END IF;
    IF job_types IS NULL THEN
        RETURN QUERY
        UPDATE pgwork.jobs AS j
           SET status = 'running', started_at = now_, attempt_count = j.attempt_count + 1, lease_owner = owner,
               lease_token = gen_random_uuid(), lease_expires_at = now_ + make_interval(secs => lease_seconds),
               heartbeat_at = now_, cancel_requested_at = NULL, progress = NULL, progress_note = NULL,
               progress_at = NULL
         WHERE j.id = ANY (ARRAY(
                SELECT c.id FROM pgwork.jobs AS c
                 WHERE c.status = 'pending' AND c.available_at <= now_
                 ORDER BY c.priority, c.available_at, c.id
                 LIMIT max_jobs
                   FOR UPDATE SKIP LOCKED))
        RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
                  j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
                  j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'running', started_at = now_, attempt_count = j.attempt_count + 1, lease_owner = owner,
           lease_token = gen_random_uuid(), lease_expires_at = now_ + make_interval(secs => lease_seconds),
           heartbeat_at = now_, cancel_requested_at = NULL, progress = NULL, progress_note = NULL,
           progress_at = NULL
     WHERE j.id = ANY (ARRAY(
            SELECT t.id
              FROM (SELECT DISTINCT u.name FROM unnest(job_types) AS u(name)) AS w,
                   LATERAL (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                             WHERE c.status = 'pending' AND c.job_type = w.name AND c.available_at <= now_
                             ORDER BY c.priority, c.available_at, c.id
                             LIMIT max_jobs
                               FOR UPDATE SKIP LOCKED) AS t
             ORDER BY t.priority, t.available_at, t.id
             LIMIT max_jobs))
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
END

-- name: claim_sql
-- LANGUAGE sql: the unlimited statement alone (no probe: SQL has no IF), planned on every call.
UPDATE pgwork.jobs AS j
   SET status = 'running', started_at = now(), attempt_count = j.attempt_count + 1, lease_owner = owner,
       lease_token = gen_random_uuid(), lease_expires_at = now() + make_interval(secs => lease_seconds),
       heartbeat_at = now(), cancel_requested_at = NULL, progress = NULL, progress_note = NULL,
       progress_at = NULL
 WHERE j.id = ANY (ARRAY(
        SELECT k.id
          FROM (SELECT a.id, a.priority, a.available_at
                  FROM (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                         WHERE job_types IS NULL AND c.status = 'pending' AND c.available_at <= now()
                         ORDER BY c.priority, c.available_at, c.id
                         LIMIT max_jobs
                           FOR UPDATE SKIP LOCKED) AS a
                UNION ALL
                SELECT t.id, t.priority, t.available_at
                  FROM (SELECT DISTINCT u.name FROM unnest(job_types) AS u(name)) AS w,
                       LATERAL (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                                 WHERE c.status = 'pending' AND c.job_type = w.name AND c.available_at <= now()
                                 ORDER BY c.priority, c.available_at, c.id
                                 LIMIT max_jobs
                                   FOR UPDATE SKIP LOCKED) AS t) AS k
         ORDER BY k.priority, k.available_at, k.id
         LIMIT max_jobs))
RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
          j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
          j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;

-- name: succeed_v12
-- Version 10's succeed_many (the one version 12 runs), word for word.
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    WITH input AS (
        SELECT t.id, t.token, t.result FROM unnest(job_ids, tokens, results) AS t(id, token, result)
    ), held AS (
        UPDATE pgwork.jobs AS j
           SET status = 'succeeded', completed_at = now_, lease_token = NULL, lease_expires_at = NULL,
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

-- name: succeed_sql
-- LANGUAGE sql: the same statement, planned on every call.
WITH input AS (
    SELECT t.id, t.token, t.result FROM unnest(job_ids, tokens, results) AS t(id, token, result)
), held AS (
    UPDATE pgwork.jobs AS j
       SET status = 'succeeded', completed_at = now(), lease_token = NULL, lease_expires_at = NULL,
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

-- name: claim_bare
-- The reference loop's claim statement wrapped in the same kind of function, returning the same
-- columns: what the wrapper alone costs.
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'running', started_at = now(), attempt_count = j.attempt_count + 1, lease_owner = owner,
           lease_token = gen_random_uuid(), lease_expires_at = now() + make_interval(secs => lease_seconds),
           heartbeat_at = now(), cancel_requested_at = NULL, progress = NULL, progress_note = NULL,
           progress_at = NULL
     WHERE j.id = (SELECT c.id FROM pgwork.jobs AS c
                    WHERE c.status = 'pending' AND c.available_at <= now()
                    ORDER BY c.priority, c.available_at, c.id
                    LIMIT 1
                      FOR UPDATE SKIP LOCKED)
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
END

-- name: succeed_join
-- Version 10's succeed_many with the written rows joined instead of probed by EXISTS, and the
-- fenced rows found through the primary key (the status test cast so the planner cannot choose
-- a scan of every running job, which it does when the statistics saw few running).
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    WITH held AS (
        UPDATE pgwork.jobs AS j
           SET status = 'succeeded', completed_at = now_, lease_token = NULL, lease_expires_at = NULL,
               last_error = CASE WHEN j.cancel_requested_at IS NULL THEN j.last_error
                                 ELSE right(coalesce(j.last_error || ' ', '') || pgwork.cancel_too_late(j.cancel_requested_at), 8000)
                            END
          FROM unnest(job_ids, tokens, results) AS i(id, token, result)
         WHERE j.id = i.id AND j.lease_token = i.token AND j.status::text = 'running'
        RETURNING j.id, j.job_type, j.idempotency_key, j.lease_owner, i.result
    ), written AS (
        INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
        SELECT h.idempotency_key, h.id, h.job_type, h.lease_owner, h.result FROM held AS h ORDER BY h.id
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING job_id
    )
    SELECT h.id, w.job_id IS NOT NULL FROM held AS h LEFT JOIN written AS w ON w.job_id = h.id;
END

-- name: succeed_bare
-- The reference loop's completion (one job, unfenced, nothing returned but the id) in the same
-- kind of function: what the wrapper alone costs on the finish.
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH done AS (
        UPDATE pgwork.jobs AS j
           SET status = 'succeeded', completed_at = now(), lease_token = NULL, lease_expires_at = NULL
         WHERE j.id = job_ids[1]
        RETURNING j.id, j.job_type, j.idempotency_key, j.lease_owner
    ), written AS (
        INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
        SELECT d.idempotency_key, d.id, d.job_type, d.lease_owner, results[1] FROM done AS d
        ON CONFLICT (idempotency_key) DO NOTHING
    )
    SELECT d.id, true FROM done AS d;
END

-- name: succeed_leftjoin
-- Version 10's succeed_many with the written rows joined instead of probed by EXISTS (plans as
-- version 10's otherwise).
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    WITH held AS (
        UPDATE pgwork.jobs AS j
           SET status = 'succeeded', completed_at = now_, lease_token = NULL, lease_expires_at = NULL,
               last_error = CASE WHEN j.cancel_requested_at IS NULL THEN j.last_error
                                 ELSE right(coalesce(j.last_error || ' ', '') || pgwork.cancel_too_late(j.cancel_requested_at), 8000)
                            END
          FROM unnest(job_ids, tokens, results) AS i(id, token, result)
         WHERE j.id = i.id AND j.lease_token = i.token AND j.status = 'running'
        RETURNING j.id, j.job_type, j.idempotency_key, j.lease_owner, i.result
    ), written AS (
        INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
        SELECT h.idempotency_key, h.id, h.job_type, h.lease_owner, h.result FROM held AS h ORDER BY h.id
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING job_id
    )
    SELECT h.id, w.job_id IS NOT NULL FROM held AS h LEFT JOIN written AS w ON w.job_id = h.id;
END
