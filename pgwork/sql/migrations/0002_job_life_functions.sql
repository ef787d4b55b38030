-- pgwork schema, version 2: the job's life as functions, so each role can do only its job.
--
-- Version 1 let a worker role UPDATE the lease and status columns and INSERT results directly:
-- a compromised handler (it has DATABASE_URL in its environment) could take another worker's
-- lease, mark a job it never ran as succeeded or reset attempt_count. From here on the roles
-- pgwork grants change jobs only through these SECURITY DEFINER functions, each of which checks
-- the lease token itself; they hold no INSERT, UPDATE or DELETE on the tables (a producer's
-- INSERT is limited to the columns that say what a job is, so a new row always starts pending).
--
-- Every function runs as the schema owner with a fixed search_path (pg_catalog first, pg_temp
-- last, so no caller's object can stand in for a built-in), and names every object with its
-- schema anyway. The functions are plpgsql: PostgreSQL 15 plans a LANGUAGE sql function that
-- cannot be inlined (SECURITY DEFINER ones cannot) on every call, while plpgsql keeps its plans
-- for the session.
--
-- `at` parameters move the clock for tests (a fixed instant instead of sleeping). Only the
-- schema owner, or a role that has its privileges, may pass one: a worker that could move the
-- clock could claim jobs scheduled for later or, as a reaper, take every live lease.

CREATE FUNCTION pgwork.clock(at timestamptz) RETURNS timestamptz
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pgwork, pg_temp AS $$
BEGIN
    IF at IS NULL THEN
        RETURN now();
    END IF;
    IF pg_has_role(session_user, (SELECT n.nspowner FROM pg_namespace AS n WHERE n.nspname = 'pgwork'), 'USAGE') THEN
        RETURN at;
    END IF;
    RAISE EXCEPTION 'pgwork: only the owner of schema pgwork may pass a clock instant (at); call with NULL'
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- claim: choose, lock (skipping rows another claimer holds) and mark, in one statement. The inner
-- ORDER BY matches jobs_claim_idx so the scan stops at the first qualifying rows; the ids go out
-- as an array so the outer UPDATE is a primary-key lookup whatever the plan. The statement
-- between RETURN QUERY and END is what the plan tests EXPLAIN (pgwork.queue.claim_statement
-- reads it back from this function), so keep it the function's only statement. With the limit a
-- parameter the server would plan it afresh on every call (custom plans look cheaper than the
-- generic one); forcing the generic plan keeps one plan for every limit.
CREATE FUNCTION pgwork.claim(
    owner text, job_types text[], max_jobs integer, lease_seconds double precision, at timestamptz DEFAULT NULL
) RETURNS TABLE (
    id bigint, job_type text, payload jsonb, priority smallint, attempt_count smallint, max_attempts smallint,
    idempotency_key text, trace_context jsonb, lease_owner text, lease_token uuid,
    lease_expires_at timestamptz, created_at timestamptz, last_error text
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
            SELECT c.id FROM pgwork.jobs AS c
             WHERE c.status = 'pending'
               AND c.available_at <= now_
               AND (job_types IS NULL OR c.job_type = ANY (job_types))
             ORDER BY c.priority, c.available_at, c.id
             LIMIT max_jobs
               FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error;
END
$$;

-- heartbeat: renew many leases, each fenced by its per-claim token; one row per lease still held.
CREATE FUNCTION pgwork.heartbeat(
    job_ids bigint[], tokens uuid[], lease_seconds double precision, at timestamptz DEFAULT NULL
) RETURNS TABLE (id bigint, cancel_requested boolean, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET heartbeat_at = now_,
           lease_expires_at = now_ + make_interval(secs => lease_seconds)
      FROM unnest(job_ids, tokens) AS l(id, token)
     WHERE j.id = l.id AND j.lease_token = l.token AND j.status = 'running'
    RETURNING j.id, j.cancel_requested_at IS NOT NULL, j.lease_expires_at;
END
$$;

-- succeed: mark succeeded and write the effect in one statement, both fenced: if the token no
-- longer holds the row nothing is written. produced_by is the owner the claim recorded, not
-- what the caller says.
CREATE FUNCTION pgwork.succeed(job_id bigint, token uuid, result jsonb, at timestamptz DEFAULT NULL)
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
               cancel_requested_at = NULL
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

-- succeed_many: succeed for many leases in one statement, each fenced by its own token, each
-- result written once per idempotency key (a key already present, or shared by two jobs of the
-- batch, keeps its first row). One row back per job that was still held.
CREATE FUNCTION pgwork.succeed_many(job_ids bigint[], tokens uuid[], results jsonb[], at timestamptz DEFAULT NULL)
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
               cancel_requested_at = NULL
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

-- fail: the caller decides whether the failure is worth a retry and after what delay
-- (retry_delay NULL: do not retry); the function applies it only while attempts remain, so no
-- caller can keep a job retrying past its budget. The decision is made once (`decided`) and
-- every column follows from it. last_error always keeps the newest error.
CREATE FUNCTION pgwork.fail(
    job_id bigint, token uuid, error text, retry_delay double precision, at timestamptz DEFAULT NULL
) RETURNS TABLE (status text, available_at timestamptz, attempt_count smallint, max_attempts smallint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = CASE WHEN d.retry_at IS NULL THEN 'dead' ELSE 'pending' END::pgwork.job_status,
           available_at = coalesce(d.retry_at, j.available_at),
           completed_at = CASE WHEN d.retry_at IS NULL THEN now_ END,
           started_at = CASE WHEN d.retry_at IS NULL THEN j.started_at END,
           lease_owner = CASE WHEN d.retry_at IS NULL THEN j.lease_owner END,
           last_error = left(error, 8000),
           lease_token = NULL,
           lease_expires_at = NULL,
           cancel_requested_at = NULL
      FROM (SELECT c.id,
                   CASE WHEN retry_delay IS NOT NULL AND c.attempt_count < c.max_attempts
                        THEN now_ + make_interval(secs => greatest(retry_delay, 0)) END AS retry_at
              FROM pgwork.jobs AS c WHERE c.id = job_id) AS d
     WHERE j.id = d.id AND j.lease_token = token AND j.status = 'running'
    RETURNING j.status::text, j.available_at, j.attempt_count, j.max_attempts;
END
$$;

-- release: hand a job back untouched by failure (graceful shutdown). attempt_count keeps
-- counting claims: the release is recorded in last_error, not refunded.
CREATE FUNCTION pgwork.release(job_id bigint, token uuid, note text, at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'pending',
           available_at = now_,
           started_at = NULL,
           lease_owner = NULL,
           lease_token = NULL,
           lease_expires_at = NULL,
           last_error = right(coalesce(j.last_error || ' ', '') || left(note, 8000), 8000)
     WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
       AND j.cancel_requested_at IS NULL
    RETURNING j.id;
END
$$;

-- acknowledge_cancel: the holder of a job whose cancellation was requested stops and records it.
CREATE FUNCTION pgwork.acknowledge_cancel(job_id bigint, token uuid, note text, at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'cancelled',
           completed_at = now_,
           lease_token = NULL,
           lease_expires_at = NULL,
           last_error = right(coalesce(j.last_error || ' ', '') || left(note, 8000), 8000)
     WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
       AND j.cancel_requested_at IS NOT NULL
    RETURNING j.id;
END
$$;

-- reap: running rows whose lease lapsed. Status and expiry are re-checked by the same statement
-- under the row lock, so a job completed a moment earlier is left alone. attempt_count is kept:
-- a job that keeps killing its worker runs out of attempts and goes dead instead of retrying
-- forever; a job whose cancellation was requested ends cancelled.
CREATE FUNCTION pgwork.reap(max_jobs integer, at timestamptz DEFAULT NULL)
RETURNS TABLE (
    id bigint, job_type text, previous_owner text, attempt_count smallint, status text,
    overdue_seconds double precision
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    WITH expired AS (
        SELECT r.id FROM pgwork.jobs AS r
         WHERE r.status = 'running' AND r.lease_expires_at < now_
         ORDER BY r.lease_expires_at
         LIMIT max_jobs
           FOR UPDATE SKIP LOCKED
    ), before AS (
        SELECT b.id, b.lease_owner, b.lease_expires_at FROM pgwork.jobs AS b JOIN expired AS e ON e.id = b.id
    )
    UPDATE pgwork.jobs AS j
       SET status = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'::pgwork.job_status
                         WHEN j.attempt_count >= j.max_attempts THEN 'dead'::pgwork.job_status
                         ELSE 'pending'::pgwork.job_status END,
           available_at = now_,
           started_at = NULL,
           completed_at = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt_count >= j.max_attempts
                               THEN now_ END,
           lease_owner = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt_count >= j.max_attempts
                              THEN j.lease_owner END,
           lease_token = NULL,
           lease_expires_at = NULL,
           last_error = right(coalesce(j.last_error || ' ', '')
                              || format('[lease expired, reclaimed from %s at %s]', j.lease_owner, now_), 8000)
      FROM before AS b
     WHERE j.id = b.id AND j.status = 'running' AND j.lease_expires_at < now_
    RETURNING j.id, j.job_type, b.lease_owner, j.attempt_count, j.status::text,
              extract(epoch FROM now_ - b.lease_expires_at)::double precision;
END
$$;

-- prune: delete finished history older than the cut-off, one bounded batch per call so no
-- statement holds locks for long; returns how many rows went. Only history: a status outside
-- succeeded/cancelled/dead matches nothing whatever the caller asks. job_results are the effect
-- and are never pruned here.
CREATE FUNCTION pgwork.prune(
    statuses text[], older_than_seconds double precision, batch integer, at timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    deleted bigint;
BEGIN
    WITH doomed AS (
        SELECT p.id FROM pgwork.jobs AS p
         WHERE p.status = ANY (statuses::pgwork.job_status[])
           AND p.status IN ('succeeded', 'cancelled', 'dead')
           AND p.completed_at < now_ - make_interval(secs => greatest(older_than_seconds, 0))
         LIMIT batch
    )
    DELETE FROM pgwork.jobs AS j USING doomed AS d WHERE j.id = d.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

-- retry: requeue dead (or cancelled) jobs now, optionally raising max_attempts.
CREATE FUNCTION pgwork.retry(job_ids bigint[], new_max_attempts smallint, at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'pending',
           available_at = now_,
           completed_at = NULL,
           started_at = NULL,
           lease_owner = NULL,
           max_attempts = coalesce(new_max_attempts, j.max_attempts),
           last_error = right(coalesce(j.last_error || ' ', '') || format('[requeued by hand at %s]', now_), 8000)
     WHERE j.id = ANY (job_ids) AND j.status IN ('dead', 'cancelled')
    RETURNING j.id;
END
$$;

-- cancel: pending jobs end cancelled at once; a running job is not taken from its holder, the
-- request is seen at its next heartbeat. One row per job affected, saying which.
CREATE FUNCTION pgwork.cancel(job_ids bigint[], at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint, was text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'cancelled',
           completed_at = now_,
           last_error = right(coalesce(j.last_error || ' ', '') || format('[cancelled at %s]', now_), 8000)
     WHERE j.id = ANY (job_ids) AND j.status = 'pending'
    RETURNING j.id, 'pending'::text;
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET cancel_requested_at = coalesce(j.cancel_requested_at, now_)
     WHERE j.id = ANY (job_ids) AND j.status = 'running'
    RETURNING j.id, 'running'::text;
END
$$;

-- How many jobs each worker holds, for the operator's pod-deletion-cost (a reader question).
CREATE FUNCTION pgwork.running_by_owner(job_types text[] DEFAULT NULL)
RETURNS TABLE (owner text, jobs bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT j.lease_owner, count(*)
      FROM pgwork.jobs AS j
     WHERE j.status = 'running'
       AND (running_by_owner.job_types IS NULL OR j.job_type = ANY (running_by_owner.job_types))
     GROUP BY j.lease_owner
$$;

-- The operator's questions read the tables as the owner, so a reader needs no SELECT on the
-- tables that hold payloads and results: counts, ages, ids, types, owners and errors only.
ALTER FUNCTION pgwork.queue_stats(text[], timestamptz) SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp;
ALTER FUNCTION pgwork.running_jobs(timestamptz) SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp;
ALTER FUNCTION pgwork.retrying_jobs(timestamptz) SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp;
ALTER FUNCTION pgwork.dead_jobs() SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp;
-- The insert trigger runs as whoever inserts; a fixed path keeps their objects out of it too.
ALTER FUNCTION pgwork.notify_jobs() SET search_path = pg_catalog, pgwork, pg_temp;

-- PostgreSQL lets PUBLIC execute every new function. Nobody but the owner may call these unless
-- a profile says so. (A per-schema ALTER DEFAULT PRIVILEGES cannot take back that global
-- default, so every later migration ends with this same line; tests/core/test_grants.py checks.)
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;

-- The profiles `pgwork grant` applies, kept here with the objects they name so they change in
-- the migration that changes those objects (a later migration that adds a function replaces
-- this one and re-applies it to the roles that hold the profile). A role ends up with exactly
-- the profiles given (and the ones they include): whatever else it held on schema pgwork is
-- revoked first, so granting is also how a role is narrowed.
--   reader     the operator's questions: stats, running, retrying, dead, running_by_owner
--   producer   reader + enqueue (INSERT of the columns that say what a job is; SELECT of id)
--   worker     producer + claim, heartbeat, succeed, succeed_many, fail, release, acknowledge_cancel
--   reaper     reader + reap, prune (what the reaper and prune CronJobs run)
--   maintainer reaper + retry, cancel
CREATE FUNCTION pgwork.grant_profiles(grantee text, profiles text[]) RETURNS text[]
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
                       'pgwork.fail(bigint, uuid, text, double precision, timestamptz), '
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

-- Carry version-1 roles forward. A role `pgwork grant` set up under version 1 (it can read
-- pgwork.schema_version) gets the version-2 profile that keeps it working, and loses its direct
-- writes and its SELECT on payloads and results: a v1 worker (it could UPDATE leases) also ran
-- the reaper, so it becomes worker + reaper; a v1 maintainer (it could DELETE) becomes worker +
-- maintainer; anything else becomes reader. Narrow them afterwards with `pgwork grant`.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.rolname,
               bool_or(g.privilege_type = 'DELETE' AND g.relname = 'jobs') AS deletes,
               bool_or(g.privilege_type = 'UPDATE' AND g.relname = 'jobs') AS updates
          FROM (SELECT c.relname, x.grantee, x.privilege_type
                  FROM pg_class AS c, aclexplode(c.relacl) AS x
                 WHERE c.relnamespace = 'pgwork'::regnamespace AND x.grantee <> c.relowner
                UNION ALL
                SELECT c.relname, x.grantee, x.privilege_type
                  FROM pg_class AS c JOIN pg_attribute AS t ON t.attrelid = c.oid, aclexplode(t.attacl) AS x
                 WHERE c.relnamespace = 'pgwork'::regnamespace AND x.grantee <> c.relowner) AS g
          JOIN pg_roles AS a ON a.oid = g.grantee
         WHERE NOT pg_has_role(a.oid, (SELECT n.nspowner FROM pg_namespace AS n WHERE n.nspname = 'pgwork'), 'MEMBER')
         GROUP BY a.rolname
        HAVING bool_or(g.privilege_type = 'SELECT' AND g.relname = 'schema_version')
    LOOP
        PERFORM pgwork.grant_profiles(
            r.rolname,
            CASE WHEN r.deletes THEN ARRAY['worker', 'maintainer']
                 WHEN r.updates THEN ARRAY['worker', 'reaper']
                 ELSE ARRAY['reader'] END);
    END LOOP;
END
$$;
