-- pgwork schema, version 5: producers can wait for a job's outcome.
--
-- `App.wait(job_id)` / `AsyncQueue.wait` LISTEN for a job to finish and then read how it ended.
-- Two things were missing: a notification when a job reaches a final state (migration 0001
-- notifies only on INSERT, to wake workers), and a way for a granted role to read the outcome
-- (the roles `pgwork grant` sets up cannot SELECT pgwork.jobs or pgwork.job_results).
--
-- The notification: one per job that becomes succeeded, dead or cancelled, on channel
-- pgwork_finished with the job id as payload, delivered at commit (so a waiter never reads the
-- row before the finishing transaction is visible). A row trigger with a WHEN clause, so claims
-- and heartbeats (which do not change status to a final one) never run it. Waiters also poll,
-- so a lost notification (a pooler, a dropped connection) costs latency, not correctness.
--
-- The outcome, in two functions because the profiles see different things:
--   pgwork.job_status(id)   status, attempts and last error: what a reader may already learn from
--                           the running and dead functions, so a reader can wait for a job to end;
--   pgwork.job_outcome(id)  the same and, once succeeded, the result stored under the job's
--                           idempotency key (the first run's, when two jobs shared a key). Granted
--                           with the producer profile (and so to worker): the role that enqueues
--                           is the one that waits for a result. Not to reader, which by design
--                           sees no payload and no result.

CREATE FUNCTION pgwork.notify_finished() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pgwork, pg_temp AS $$
BEGIN
    PERFORM pg_notify('pgwork_finished', NEW.id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_notify_finished AFTER UPDATE OF status ON pgwork.jobs
    FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'dead', 'cancelled') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION pgwork.notify_finished();

CREATE FUNCTION pgwork.job_outcome(job_id bigint)
RETURNS TABLE (id bigint, status text, attempt_count smallint, last_error text, result jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT j.id, j.status::text, j.attempt_count, j.last_error,
           CASE WHEN j.status = 'succeeded' THEN r.result END
      FROM pgwork.jobs AS j
      LEFT JOIN pgwork.job_results AS r ON r.idempotency_key = j.idempotency_key
     WHERE j.id = job_outcome.job_id;  -- qualified: job_results has a job_id column too
END
$$;

CREATE FUNCTION pgwork.job_status(job_id bigint)
RETURNS TABLE (id bigint, status text, attempt_count smallint, last_error text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT j.id, j.status::text, j.attempt_count, j.last_error FROM pgwork.jobs AS j WHERE j.id = job_status.job_id;
END
$$;

-- Carry the roles `pgwork grant` set up forward: a reader (every profile includes it) may wait
-- for a job to end; a producer (it may INSERT a job's type) may also read results.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.rolname, has_column_privilege(a.oid, 'pgwork.jobs', 'job_type', 'INSERT') AS produces
          FROM pg_roles AS a
         WHERE has_function_privilege(a.oid, 'pgwork.queue_stats(text[], timestamptz)', 'EXECUTE')
           AND NOT pg_has_role(a.oid, (SELECT n.nspowner FROM pg_namespace AS n WHERE n.nspname = 'pgwork'), 'MEMBER')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgwork.job_status(bigint) TO %I', r.rolname);
        IF r.produces THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION pgwork.job_outcome(bigint) TO %I', r.rolname);
        END IF;
    END LOOP;
END
$$;

-- The profiles again, as 0003 keeps them, with job_status in the reader profile and job_outcome
-- in the producer profile.
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
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgwork.job_status(bigint) TO %I', grantee);
    END IF;
    IF 'producer' = ANY (wanted) THEN
        EXECUTE format('GRANT INSERT (job_type, payload, priority, max_attempts, available_at, idempotency_key, '
                       'trace_context), SELECT (id) ON pgwork.jobs TO %I', grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgwork.job_outcome(bigint) TO %I', grantee);
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
