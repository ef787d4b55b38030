-- pgwork schema, version 13: a cancellation requested while a job ran is not lost when the
-- attempt then fails.
--
-- `pgwork cancel` on a running job only sets cancel_requested_at; the worker learns of it at its
-- next heartbeat and stops the handler, which ends the job cancelled. But a handler that failed
-- before that heartbeat went through set_state_if_held, which reset cancel_requested_at to NULL
-- and sent the job back to pending: the job the user cancelled ran again, up to its whole
-- attempt budget, and nothing said a cancel had been asked for. (The reaper already ends such a
-- job cancelled; version 10 made a success keep the request; this is the last path.)
--
-- Now a failed attempt of a job whose cancellation was requested ends cancelled, whatever the
-- holder decided (a retry or dead): the user's request is the newer decision, and the job runs
-- no more either way. The handler's error is kept in last_error with a note, and
-- cancel_requested_at stays on the row. The answer's status is 'cancelled', so the worker counts
-- the outcome as cancelled. fail_many applies each failure through this function, so the batched
-- path changes with it. Same signature, same grants: nothing else to migrate.

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
     WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
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
     WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
    RETURNING j.status::text, j.available_at, j.attempt_count, j.max_attempts;
END
$$;
