-- pgwork schema: the claim runs only the arm it was asked for (issue 28).
-- claim: replaces 0023's.
--
-- 0023's claim, when no limit applied, ran one statement whose pick joined two arms by UNION ALL:
-- any type (`job_types IS NULL`) and the types asked for. The arm not asked for read nothing, but
-- its scans of the ready ring's eight segments were started and ended all the same, every call.
-- Now the function chooses the arm by IF, each arm its own statement with its own generic plan:
-- a claim of the worker's own types (how every worker claims) costs about 35 microseconds less
-- of the server's time (PostgreSQL 15; docs/benchmarks.md section 13). What each arm does is
-- unchanged: the same order, the same locks, the same rows deleted from the ring, the same
-- UPDATE and the same answer. The steps after the pick are written out in each arm, as the
-- limited branch already did: a statement is planned whole, and a shared helper would cost a
-- call of its own. The limited branch (claim_limited) is unchanged.

CREATE OR REPLACE FUNCTION pgwork.claim(
    owner text, job_types text[], max_jobs integer, lease_seconds double precision, at timestamptz DEFAULT NULL
) RETURNS TABLE (id bigint, job_type text, payload jsonb, priority smallint, attempt_count smallint,
                 max_attempts smallint, idempotency_key text, trace_context jsonb, lease_owner text,
                 lease_token uuid, lease_expires_at timestamptz, created_at timestamptz, last_error text,
                 timeout_seconds double precision, checkpoint jsonb)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp SET plan_cache_mode = force_generic_plan
-- A segment's statistics are stale by design (it fills for 10 s, then is truncated): a generic plan
-- made while one looked empty must still read it by index, never scan and sort it.
SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    chosen bigint[];
BEGIN
    IF EXISTS (SELECT 1 FROM pgwork.job_limits AS l WHERE job_types IS NULL OR l.job_type = ANY (job_types)) THEN
        -- claim_limited locked the ready rows it chose; the same steps as below, by job id.
        chosen := pgwork.claim_limited(job_types, max_jobs, now_);
        RETURN QUERY
        WITH held AS MATERIALIZED (
            SELECT h.id FROM pgwork.jobs AS h
             WHERE h.id = ANY (chosen) AND h.status::text = 'pending'
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM pgwork.ready AS r
             WHERE r.job_id = ANY (ARRAY(
                    SELECT c.id FROM unnest(chosen) AS c(id)
                     WHERE c.id IN (SELECT x.id FROM held AS x)
                        OR (SELECT y.status FROM pgwork.jobs AS y WHERE y.id = c.id) IS DISTINCT FROM 'pending'))
        )
        UPDATE pgwork.jobs AS j
           SET status = 'running',
               started_at = now_,
               attempt_count = j.attempt_count + 1,
               lease_owner = owner,
               lease_token = gen_random_uuid(),
               lease_expires_at = now_ + make_interval(secs => lease_seconds),
               heartbeat_at = now_,
               cancel_requested_at = NULL,
               progress = NULL,
               progress_note = NULL,
               progress_at = NULL
         WHERE j.id = ANY (ARRAY(SELECT h.id FROM held AS h))
        RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
                  j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
                  j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
        RETURN;
    END IF;
    IF job_types IS NULL THEN
        RETURN QUERY
        WITH picked AS MATERIALIZED (
            SELECT c.tableoid AS part, c.ctid AS row_at, c.job_id FROM pgwork.ready AS c
             WHERE c.available_at <= now_
             ORDER BY c.priority, c.available_at, c.job_id
             LIMIT max_jobs
               FOR UPDATE SKIP LOCKED
        ), held AS MATERIALIZED (
            -- The picked jobs' rows, locked if still pending; a row another session holds (a cancel
            -- in flight) is skipped, as the claim always did. `status::text`, not `status`: a generic
            -- plan must find these few rows by primary key, never by a pending-only partial index.
            SELECT x.id FROM pgwork.jobs AS x
             WHERE x.id = ANY (ARRAY(SELECT p.job_id FROM picked AS p))
               AND x.status::text = 'pending'
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            -- The ready rows taken, and those whose job is not pending (stale); a row whose job
            -- another session holds stays, for that session's trigger to settle.
            -- By the rows' own addresses (locked above, so they stay put): a TID scan, whatever the
            -- statistics, and no page read in a truncated segment.
            DELETE FROM pgwork.ready AS r
             WHERE r.ctid = ANY (ARRAY(SELECT p.row_at FROM picked AS p))
               AND (r.tableoid, r.ctid) IN (
                    SELECT p.part, p.row_at FROM picked AS p
                     WHERE p.job_id IN (SELECT h.id FROM held AS h)
                        OR (SELECT y.status FROM pgwork.jobs AS y WHERE y.id = p.job_id) IS DISTINCT FROM 'pending')
        )
        UPDATE pgwork.jobs AS j
           SET status = 'running',
               started_at = now_,
               attempt_count = j.attempt_count + 1,
               lease_owner = owner,
               lease_token = gen_random_uuid(),
               lease_expires_at = now_ + make_interval(secs => lease_seconds),
               heartbeat_at = now_,
               cancel_requested_at = NULL,
               progress = NULL,
               progress_note = NULL,
               progress_at = NULL
         WHERE j.id = ANY (ARRAY(SELECT h.id FROM held AS h))
        RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
                  j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
                  j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
        RETURN;
    END IF;
    RETURN QUERY
    WITH picked AS MATERIALIZED (
        SELECT k.part, k.row_at, k.job_id
          FROM (SELECT t.part, t.row_at, t.job_id, t.priority, t.available_at
                  FROM (SELECT DISTINCT u.name FROM unnest(job_types) AS u(name)) AS w,
                       LATERAL (SELECT c.tableoid AS part, c.ctid AS row_at, c.job_id, c.priority, c.available_at FROM pgwork.ready AS c
                                 WHERE c.job_type = w.name
                                   AND c.available_at <= now_
                                 ORDER BY c.priority, c.available_at, c.job_id
                                 LIMIT max_jobs
                                   FOR UPDATE SKIP LOCKED) AS t) AS k
         ORDER BY k.priority, k.available_at, k.job_id
         LIMIT max_jobs
    ), held AS MATERIALIZED (
        -- The picked jobs' rows, locked if still pending; a row another session holds (a cancel
        -- in flight) is skipped, as the claim always did. `status::text`, not `status`: a generic
        -- plan must find these few rows by primary key, never by a pending-only partial index.
        SELECT x.id FROM pgwork.jobs AS x
         WHERE x.id = ANY (ARRAY(SELECT p.job_id FROM picked AS p))
           AND x.status::text = 'pending'
           FOR UPDATE SKIP LOCKED
    ), gone AS (
        -- The ready rows taken, and those whose job is not pending (stale); a row whose job
        -- another session holds stays, for that session's trigger to settle.
        -- By the rows' own addresses (locked above, so they stay put): a TID scan, whatever the
        -- statistics, and no page read in a truncated segment.
        DELETE FROM pgwork.ready AS r
         WHERE r.ctid = ANY (ARRAY(SELECT p.row_at FROM picked AS p))
           AND (r.tableoid, r.ctid) IN (
                SELECT p.part, p.row_at FROM picked AS p
                 WHERE p.job_id IN (SELECT h.id FROM held AS h)
                    OR (SELECT y.status FROM pgwork.jobs AS y WHERE y.id = p.job_id) IS DISTINCT FROM 'pending')
    )
    UPDATE pgwork.jobs AS j
       SET status = 'running',
           started_at = now_,
           attempt_count = j.attempt_count + 1,
           lease_owner = owner,
           lease_token = gen_random_uuid(),
           lease_expires_at = now_ + make_interval(secs => lease_seconds),
           heartbeat_at = now_,
           cancel_requested_at = NULL,
           progress = NULL,
           progress_note = NULL,
           progress_at = NULL
     WHERE j.id = ANY (ARRAY(SELECT h.id FROM held AS h))
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
END
$$;
