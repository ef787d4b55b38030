-- pgwork schema, version 7: one queue's backlog costs nothing to another's.
--
-- Many JobQueues share one database. Up to version 6 the claim index had no job type, so a claim
-- for `embed` walked past every pending `ocr` row (measured: 200,000 pending ocr, 10 embed: 88 ms
-- and 3,918 buffers per claim, against 0.4 ms and 4), and pgwork.queue_stats counted every live
-- row on every operator poll (252 ms at 200,000 pending). Here:
--   * the claim for a set of types reads one index that leads with the type, one bounded scan
--     per type, merged in priority order; the claim with no type keeps jobs_claim_idx;
--   * pgwork.backlog answers the operator's poll with counts capped at what scaling needs and ages
--     read from the head of an index, so its cost follows the number of types, not of rows;
--   * ages are computed on finite timestamps only: PostgreSQL 15 cannot subtract 'infinity'
--     (a row written by plain SQL made queue_stats fail for every type).
--
-- The indexes are built inside the migration's transaction (CREATE INDEX, not CONCURRENTLY): they
-- cover only pending and dead rows, so the build is short unless millions are pending; writes to
-- pgwork.jobs wait for it. None holds a column a heartbeat writes (version 4: renewals stay HOT).

-- Claims: the type first, then the claim's ORDER BY, so a claim for B starts at B's head.
CREATE INDEX jobs_claim_type_idx ON pgwork.jobs (job_type, priority, available_at, id) WHERE status = 'pending';
-- The backlog's questions, each a range or the head of its type's part of an index.
CREATE INDEX jobs_pending_due_idx ON pgwork.jobs (job_type, available_at) WHERE status = 'pending';
CREATE INDEX jobs_dead_type_idx ON pgwork.jobs (job_type, completed_at) WHERE status = 'dead';
-- Retrying jobs by type (retrying_jobs() reads them all and sorts; it never used the order).
DROP INDEX pgwork.jobs_retrying_idx;
CREATE INDEX jobs_retrying_idx ON pgwork.jobs (job_type, attempt_count) WHERE status = 'pending' AND attempt_count > 0;

-- claim: as in version 2 (one statement, FOR UPDATE SKIP LOCKED, a fresh token, attempt counted
-- once), with two arms of which one runs. With no types: the first ready rows of jobs_claim_idx
-- (the arm's `job_types IS NULL` is a one-time filter, so with types it reads nothing). With
-- types: for each distinct type the first `max_jobs` ready rows of jobs_claim_type_idx, each
-- scan locking what it returns; then the best `max_jobs` of what the arms found, in the global
-- (priority, available_at, id) order. Rows a type's scan locked that did not make the cut (at
-- most max_jobs per type) stay locked until the claiming transaction ends (Queue.claim commits
-- at once); a concurrent claimer skips them meanwhile, as it skips any locked row. The ids go out as an array so the UPDATE is a
-- primary-key lookup whatever the plan (a generic plan joining the UPDATE to the subquery
-- could scan the table). The statement is still the function's only one: the plan tests and the
-- lab EXPLAIN it as claim_statement reads it back.
CREATE OR REPLACE FUNCTION pgwork.claim(
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
              j.created_at, j.last_error;
END
$$;

-- backlog: the operator's poll. Per job type: counts of ready, scheduled, retrying, running and
-- dead jobs, each stopping at `cap` (NULL: exact), so a count equal to `cap` means "at least
-- cap"; the operator passes maxReplicas x targetBacklogPerWorker + 1, past which every count asks
-- for the same replicas. oldest_wait_seconds is how long the longest-due ready job has been due
-- (now - available_at, the head of jobs_pending_due_idx); max_heartbeat_age_seconds the oldest
-- running heartbeat. Running figures come from one pass over the jobs in flight (jobs_running_idx):
-- the fleet bounds them, and indexing heartbeat_at would end HOT heartbeats. Rows whose timestamp
-- is infinite are counted but give no age. With job_types NULL, the pending and dead types are
-- read off the indexes by skipping from one type to the next (a few buffers per type); with
-- job_types given, each named type is answered, with zeros when it has no live job. plpgsql, so
-- a session (the operator's pooled connection) plans it once, not on every poll as a SECURITY
-- DEFINER sql function would be.
CREATE FUNCTION pgwork.backlog(job_types text[] DEFAULT NULL, cap integer DEFAULT NULL, at timestamptz DEFAULT now())
RETURNS TABLE (
    job_type text, ready bigint, scheduled bigint, retrying bigint, running bigint, dead bigint,
    oldest_wait_seconds double precision, max_heartbeat_age_seconds double precision
) LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE pending_types(t) AS (
        SELECT min(j.job_type) FROM pgwork.jobs AS j WHERE j.status = 'pending' AND job_types IS NULL
        UNION ALL
        SELECT (SELECT min(j.job_type) FROM pgwork.jobs AS j WHERE j.status = 'pending' AND j.job_type > p.t)
          FROM pending_types AS p WHERE p.t IS NOT NULL
    ), in_flight(t, n, oldest) AS (
        SELECT j.job_type, count(*),
               min(j.heartbeat_at) FILTER (WHERE j.heartbeat_at > '-infinity' AND j.heartbeat_at < 'infinity')
          FROM pgwork.jobs AS j
         WHERE j.status = 'running' AND (job_types IS NULL OR j.job_type = ANY (job_types))
         GROUP BY j.job_type
    ), dead_types(t) AS (
        SELECT min(j.job_type) FROM pgwork.jobs AS j WHERE j.status = 'dead' AND job_types IS NULL
        UNION ALL
        SELECT (SELECT min(j.job_type) FROM pgwork.jobs AS j WHERE j.status = 'dead' AND j.job_type > d.t)
          FROM dead_types AS d WHERE d.t IS NOT NULL
    ), types(t) AS (
        SELECT u.t FROM unnest(job_types) AS u(t)
        UNION SELECT p.t FROM pending_types AS p WHERE p.t IS NOT NULL
        UNION SELECT r.t FROM in_flight AS r
        UNION SELECT d.t FROM dead_types AS d WHERE d.t IS NOT NULL
    )
    SELECT w.t,
           (SELECT count(*) FROM (SELECT 1 FROM pgwork.jobs AS j
                                   WHERE j.status = 'pending' AND j.job_type = w.t AND j.available_at <= at
                                   LIMIT cap) AS n),
           (SELECT count(*) FROM (SELECT 1 FROM pgwork.jobs AS j
                                   WHERE j.status = 'pending' AND j.job_type = w.t AND j.available_at > at
                                   LIMIT cap) AS n),
           (SELECT count(*) FROM (SELECT 1 FROM pgwork.jobs AS j
                                   WHERE j.status = 'pending' AND j.attempt_count > 0 AND j.job_type = w.t
                                   LIMIT cap) AS n),
           least(coalesce(r.n, 0), cap),
           (SELECT count(*) FROM (SELECT 1 FROM pgwork.jobs AS j
                                   WHERE j.status = 'dead' AND j.job_type = w.t LIMIT cap) AS n),
           coalesce((SELECT greatest(extract(epoch FROM at) - extract(epoch FROM j.available_at), 0)
                       FROM pgwork.jobs AS j
                      WHERE j.status = 'pending' AND j.job_type = w.t
                        AND j.available_at > '-infinity' AND j.available_at <= at
                      ORDER BY j.available_at LIMIT 1), 0)::double precision,
           coalesce(greatest(extract(epoch FROM at) - extract(epoch FROM r.oldest), 0), 0)::double precision
      FROM types AS w LEFT JOIN in_flight AS r ON r.t = w.t
     ORDER BY w.t;
END
$$;

-- queue_stats (the pgwork.stats view, `pgwork stats --exact`): the same figures, exact.
CREATE OR REPLACE FUNCTION pgwork.queue_stats(job_types text[] DEFAULT NULL, at timestamptz DEFAULT now())
RETURNS TABLE (
    job_type text, ready bigint, scheduled bigint, retrying bigint, running bigint, dead bigint,
    oldest_wait_seconds double precision, max_heartbeat_age_seconds double precision
) LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT * FROM pgwork.backlog(queue_stats.job_types, NULL, queue_stats.at)
$$;

-- Roles that could read queue_stats (the reader profile) may read the backlog.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.rolname
          FROM pg_proc AS p, aclexplode(p.proacl) AS x, pg_roles AS a
         WHERE p.oid = 'pgwork.queue_stats(text[], timestamptz)'::regprocedure
           AND x.privilege_type = 'EXECUTE' AND a.oid = x.grantee AND x.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgwork.backlog(text[], integer, timestamptz) TO %I', r.rolname);
    END LOOP;
END
$$;

-- The profiles again, as 0006 keeps them, with backlog in the reader profile.
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
                       'pgwork.backlog(text[], integer, timestamptz), '
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
                       'pgwork.prune(text[], double precision, integer, timestamptz), '
                       'pgwork.prune_batch(text, double precision, integer, timestamptz, timestamptz) TO %I', grantee);
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
