-- pgwork schema, version 14: a fenced finish finds its job by primary key, whatever else is running.
--
-- The finishes fence on (id, lease_token, status = 'running'). `status = 'running'` is also the
-- predicate of jobs_running_idx, and when the statistics saw few running jobs (a queue analysed
-- while its jobs were pending, the usual case: a running job lives seconds, history is pruned)
-- the planner costs a scan of that whole index as cheaper than a primary-key probe, and takes
-- it: every finish then reads every running job (and the dead entries finished jobs left in the
-- index until vacuum), filtering on the id. Measured with scripts/claim_cost.py, one connection,
-- 2,000 jobs held by other workers: succeed_many of one job 1.42 ms (p50) against 0.57 ms by
-- primary key; claim + finish 2.05 ms against 1.20 ms. With few jobs running it changes nothing.
--
-- So the fence compares status as text: the same test (an enum equals its label), which no
-- partial index predicate can prove, so the only index left for `id = ...` is the primary key.
-- succeed_many's arrays would then make the planner keep a custom plan (planned on every call,
-- +0.2 ms: a plan for the actual one element looks cheaper than the generic plan for ten), so it
-- forces the generic plan as pgwork.claim does. Same signatures, results, SECURITY DEFINER and
-- search_path; CREATE OR REPLACE keeps every grant. Bodies otherwise as in versions 13 and 10.
-- (release, acknowledge_cancel, checkpoint and heartbeat fence the same way and are left for a
-- later version: they are off the per-job finish path.)

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
         WHERE j.id = job_id AND j.lease_token = token AND j.status::text = 'running'  -- by key: see the top
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
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
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
         WHERE j.id = i.id AND j.lease_token = i.token AND j.status::text = 'running'  -- by key: see the top
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

-- set_state_if_held (and so fail_many, which calls it once per failure): version 13's, word for
-- word (a requested cancellation wins over the failure); only the two lookups go by key.
CREATE OR REPLACE FUNCTION pgwork.set_state_if_held(
    job_id bigint, token uuid, state text, reason text, retry_delay double precision, error text,
    at timestamptz DEFAULT NULL
) RETURNS TABLE (status text, available_at timestamptz, attempt_count smallint, max_attempts smallint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    held record;
    final text;
BEGIN
    IF state IS NULL OR state NOT IN ('pending', 'dead') THEN
        RAISE EXCEPTION 'pgwork: a failed job goes to pending (a retry) or dead, not %', coalesce(quote_literal(state), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF state = 'pending' AND retry_delay IS NULL THEN
        RAISE EXCEPTION 'pgwork: a retry needs its retry_delay in seconds' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF state = 'dead' AND (reason IS NULL OR reason NOT IN ('attempts_used_up', 'not_retryable')) THEN
        RAISE EXCEPTION 'pgwork: dead needs a reason, attempts_used_up or not_retryable, not %',
            coalesce(quote_literal(reason), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT j.attempt_count, j.max_attempts, j.cancel_requested_at INTO held
      FROM pgwork.jobs AS j
     WHERE j.id = job_id AND j.lease_token = token AND j.status::text = 'running'  -- by key: see the top
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;  -- the lease is lost (reaped, finished, never ours): nothing changes
    END IF;
    -- The caller's claim about the budget is checked before the cancel is looked at: a false
    -- reason is an error whatever else happened to the job.
    IF state = 'dead' AND reason = 'attempts_used_up' AND held.attempt_count < held.max_attempts THEN
        RAISE EXCEPTION 'pgwork: job % has used % of its % attempts; it is not dead for that reason',
            job_id, held.attempt_count, held.max_attempts USING ERRCODE = 'check_violation';
    END IF;
    final := CASE WHEN held.cancel_requested_at IS NOT NULL THEN 'cancelled'
                  WHEN held.attempt_count >= held.max_attempts THEN 'dead'
                  ELSE state END;

    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = final::pgwork.job_status,
           available_at = CASE WHEN final = 'pending'
                               THEN now_ + make_interval(secs => least(greatest(retry_delay, 0), 86400))
                               ELSE j.available_at END,
           completed_at = CASE WHEN final IN ('dead', 'cancelled') THEN now_ END,
           started_at = CASE WHEN final IN ('dead', 'cancelled') THEN j.started_at END,
           lease_owner = CASE WHEN final IN ('dead', 'cancelled') THEN j.lease_owner END,
           last_error = CASE WHEN final = 'cancelled'
                             THEN left(left(error, 7800) || format(
                                      ' [cancellation requested at %s; the attempt failed before it was seen, '
                                      'so the job ends cancelled instead of being retried]',
                                      held.cancel_requested_at), 8000)
                             ELSE left(error, 8000) END,
           lease_token = NULL,
           lease_expires_at = NULL,
           cancel_requested_at = CASE WHEN final = 'cancelled' THEN j.cancel_requested_at END
     WHERE j.id = job_id AND j.lease_token = token AND j.status::text = 'running'
    RETURNING j.status::text, j.available_at, j.attempt_count, j.max_attempts;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
