-- pgwork schema, version 6: retention at scale. pgwork.prune (0002) deletes `batch` rows matching
-- `status = ANY (statuses)` in no particular order: with the statuses a parameter the planner
-- cannot prove the partial indexes on completed_at apply, so every batch scans the table from
-- its start, walking past the rows the batches before it deleted (dead until vacuum), and the
-- last batch of a large prune costs the most. prune_batch takes one status at a time, so the
-- statement names it as a literal and reads its partial index in completed_at order, and takes
-- the completed_at the previous batch reached, so each batch starts where the last stopped.
-- pgwork calls it once per short transaction; a batch never waits on a row lock (SKIP LOCKED:
-- a dead job someone is retrying by hand is left for the next run).
CREATE FUNCTION pgwork.prune_batch(
    prune_status text, older_than_seconds double precision, batch integer, after timestamptz,
    at timestamptz DEFAULT NULL
) RETURNS TABLE (deleted bigint, through timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    IF prune_status IS NULL OR prune_status NOT IN ('succeeded', 'cancelled', 'dead') THEN
        RAISE EXCEPTION 'pgwork: only history is pruned (succeeded, cancelled, dead), not %',
            quote_literal(coalesce(prune_status, 'NULL')) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'pgwork: prune batches hold 1..100000 rows, not %', batch
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The status goes in as a literal (checked above) so the plan reads its partial index.
    RETURN QUERY EXECUTE format($q$
        WITH doomed AS (
            SELECT p.id FROM pgwork.jobs AS p
             WHERE p.status = %L
               AND p.completed_at < $1
               AND p.completed_at >= coalesce($2, '-infinity'::timestamptz)
             ORDER BY p.completed_at
             LIMIT $3
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM pgwork.jobs AS j USING doomed AS d WHERE j.id = d.id RETURNING j.completed_at
        )
        SELECT count(*), max(g.completed_at) FROM gone AS g$q$, prune_status)
    USING now_ - make_interval(secs => greatest(older_than_seconds, 0)), after, batch;
END
$$;

-- Roles that could prune (the reaper profile) may use the batched form.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.rolname
          FROM pg_proc AS p, aclexplode(p.proacl) AS x, pg_roles AS a
         WHERE p.oid = 'pgwork.prune(text[], double precision, integer, timestamptz)'::regprocedure
           AND x.privilege_type = 'EXECUTE' AND a.oid = x.grantee AND x.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION '
                       'pgwork.prune_batch(text, double precision, integer, timestamptz, timestamptz) TO %I',
                       r.rolname);
    END LOOP;
END
$$;

-- The profiles again, as 0003 keeps them, with prune_batch in the reaper profile.
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
