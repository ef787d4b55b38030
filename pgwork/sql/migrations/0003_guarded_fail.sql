-- pgwork schema, version 3: failures decided in Python, applied by one guarded function.
--
-- Version 2's pgwork.fail took a retry delay and decided in SQL whether the job retried or went
-- dead, with the same CASE written into five columns. Now the worker decides (the pure function
-- pgwork.failure.decide_failure: retry after a backoff, dead because attempts are used up, dead
-- because the error is not retryable) and pgwork.set_state_if_held applies that decision, as
-- River's JobSetStateIfRunning does: it sets the state only while the caller's lease token still
-- holds the job.
--
-- Trust. A worker-profile role calls this function with arguments it chooses, and may be a
-- compromised handler holding DATABASE_URL. So the function decides nothing for the caller but
-- refuses everything a worker must not do:
--   * it touches only a running job whose per-claim token the caller presents (a token is
--     unguessable and is never shown to other roles), so no other worker's job;
--   * it never writes attempt_count or max_attempts, so no failure refunds an attempt;
--   * a retry is scheduled at most one day ahead (retry_delay is clamped to 0..86400 seconds,
--     as decide_failure clamps it), so no job can be parked out of reach for a year;
--   * a retry asked for when the attempts are used up is applied as dead (reason
--     attempts_used_up): the budget the producer set holds whatever the caller asks;
--   * dead needs its reason: not_retryable (the holder may always give up its own job: it
--     could also just fail it until its attempts run out), or attempts_used_up, which is
--     refused unless attempt_count has reached max_attempts, so a job is never buried early
--     under a false reason.
-- last_error keeps the newest error, as before. Succeeding and cancelling keep their own
-- functions: they write more than the state (a result; the cancel note), fenced the same way.

CREATE FUNCTION pgwork.set_state_if_held(
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

    SELECT j.attempt_count, j.max_attempts INTO held
      FROM pgwork.jobs AS j
     WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;  -- the lease is lost (reaped, finished, never ours): nothing changes
    END IF;
    final := CASE WHEN held.attempt_count >= held.max_attempts THEN 'dead' ELSE state END;
    IF state = 'dead' AND reason = 'attempts_used_up' AND held.attempt_count < held.max_attempts THEN
        RAISE EXCEPTION 'pgwork: job % has used % of its % attempts; it is not dead for that reason',
            job_id, held.attempt_count, held.max_attempts USING ERRCODE = 'check_violation';
    END IF;

    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = final::pgwork.job_status,
           available_at = CASE WHEN final = 'pending'
                               THEN now_ + make_interval(secs => least(greatest(retry_delay, 0), 86400))
                               ELSE j.available_at END,
           completed_at = CASE WHEN final = 'dead' THEN now_ END,
           started_at = CASE WHEN final = 'dead' THEN j.started_at END,
           lease_owner = CASE WHEN final = 'dead' THEN j.lease_owner END,
           last_error = left(error, 8000),
           lease_token = NULL,
           lease_expires_at = NULL,
           cancel_requested_at = NULL
     WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
    RETURNING j.status::text, j.available_at, j.attempt_count, j.max_attempts;
END
$$;

-- Roles that could fail jobs through pgwork.fail (the worker profile) may use the new function;
-- then the old one goes, so there is one path.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.rolname
          FROM pg_proc AS p, aclexplode(p.proacl) AS x, pg_roles AS a
         WHERE p.oid = 'pgwork.fail(bigint, uuid, text, double precision, timestamptz)'::regprocedure
           AND x.privilege_type = 'EXECUTE' AND a.oid = x.grantee AND x.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION '
                       'pgwork.set_state_if_held(bigint, uuid, text, text, double precision, text, timestamptz) TO %I',
                       r.rolname);
    END LOOP;
END
$$;
DROP FUNCTION pgwork.fail(bigint, uuid, text, double precision, timestamptz);

-- The profiles again, as 0002 keeps them, with set_state_if_held in the worker profile where
-- fail was (roles holding the profile got it above).
CREATE OR REPLACE FUNCTION pgwork.grant_profiles(grantee text, profiles text[]) RETURNS text[]
LANGUAGE plpgsql SET search_path = pg_catalog, pgwork, pg_temp AS $$
DECLARE
    wanted text[] := ARRAY[]::text[];
    expanded text[];
    profile text;
BEGIN
    IF grantee IS NULL OR lower(grantee) = 'public' OR grantee LIKE 'pg\_%'
       OR NOT EXISTS (SELECT 1 FROM pg_roles AS r WHERE r.rolname = grantee) THEN
        RAISE EXCEPTION 'pgwork: % is not a role a profile can be granted to', quote_ident(coalesce(grantee, ''))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Revoking from the owner (or a superuser, or a member of the owner) would strip the
    -- owner's own rights or narrow nothing.
    IF pg_has_role(grantee, (SELECT n.nspowner FROM pg_namespace AS n WHERE n.nspname = 'pgwork'), 'MEMBER') THEN
        RAISE EXCEPTION 'pgwork: % owns schema pgwork or has its privileges (superuser or member); a profile cannot narrow it',
            quote_ident(grantee) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH profile IN ARRAY profiles LOOP
        expanded := CASE profile
            WHEN 'reader' THEN ARRAY['reader']
            WHEN 'producer' THEN ARRAY['reader', 'producer']
            WHEN 'worker' THEN ARRAY['reader', 'producer', 'worker']
            WHEN 'reaper' THEN ARRAY['reader', 'reaper']
            WHEN 'maintainer' THEN ARRAY['reader', 'reaper', 'maintainer']
        END;
        IF expanded IS NULL THEN
            RAISE EXCEPTION 'pgwork: % is not a profile', quote_literal(profile) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        wanted := wanted || expanded;
    END LOOP;

    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA pgwork FROM %I', grantee);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgwork FROM %I', grantee);
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgwork FROM %I', grantee);
    EXECUTE format('REVOKE ALL ON SCHEMA pgwork FROM %I', grantee);

    IF 'reader' = ANY (wanted) THEN
        EXECUTE format('GRANT USAGE ON SCHEMA pgwork TO %I', grantee);
        EXECUTE format('GRANT SELECT ON pgwork.schema_version, pgwork.stats, pgwork.running, pgwork.retrying, '
                       'pgwork.dead TO %I', grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgwork.queue_stats(text[], timestamptz), '
                       'pgwork.running_jobs(timestamptz), pgwork.retrying_jobs(timestamptz), pgwork.dead_jobs(), '
                       'pgwork.running_by_owner(text[]) TO %I', grantee);
    END IF;
    IF 'producer' = ANY (wanted) THEN
        EXECUTE format('GRANT INSERT (job_type, payload, priority, max_attempts, available_at, idempotency_key, '
                       'trace_context), SELECT (id) ON pgwork.jobs TO %I', grantee);
    END IF;
    IF 'worker' = ANY (wanted) THEN
        EXECUTE format('GRANT EXECUTE ON FUNCTION '
                       'pgwork.claim(text, text[], integer, double precision, timestamptz), '
                       'pgwork.heartbeat(bigint[], uuid[], double precision, timestamptz), '
                       'pgwork.succeed(bigint, uuid, jsonb, timestamptz), '
                       'pgwork.succeed_many(bigint[], uuid[], jsonb[], timestamptz), '
                       'pgwork.set_state_if_held(bigint, uuid, text, text, double precision, text, timestamptz), '
                       'pgwork.release(bigint, uuid, text, timestamptz), '
                       'pgwork.acknowledge_cancel(bigint, uuid, text, timestamptz) TO %I', grantee);
    END IF;
    IF 'reaper' = ANY (wanted) THEN
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgwork.reap(integer, timestamptz), '
                       'pgwork.prune(text[], double precision, integer, timestamptz) TO %I', grantee);
    END IF;
    IF 'maintainer' = ANY (wanted) THEN
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgwork.retry(bigint[], smallint, timestamptz), '
                       'pgwork.cancel(bigint[], timestamptz) TO %I', grantee);
    END IF;
    RETURN ARRAY(SELECT o.p FROM unnest(ARRAY['reader', 'producer', 'worker', 'reaper', 'maintainer'])
                                 WITH ORDINALITY AS o(p, n)
                  WHERE o.p = ANY (wanted) ORDER BY o.n);
END
$$;
REVOKE EXECUTE ON FUNCTION pgwork.grant_profiles(text, text[]) FROM PUBLIC;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
