-- pgwork schema, version 8: many failures applied in one statement.
--
-- The worker collects the outcomes of short jobs and writes them a batch at a time: successes
-- through pgwork.succeed_many, failures through pgwork.fail_many, in one transaction. fail_many
-- applies each failure exactly as pgwork.set_state_if_held does for one (it calls it), so every
-- element is fenced by its own token and held to the same bounds: an element whose token does not
-- hold its job changes nothing and returns no row; an element asking for what a failure may not do
-- raises, and the whole statement (and its transaction) changes nothing.
-- Rows are taken in id order, whatever order the caller passes, so two batches never deadlock.

CREATE FUNCTION pgwork.fail_many(
    job_ids bigint[], tokens uuid[], states text[], reasons text[], retry_delays double precision[],
    errors text[], at timestamptz DEFAULT NULL
) RETURNS TABLE (id bigint, status text, available_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    n integer := coalesce(cardinality(job_ids), 0);
    i integer;
BEGIN
    IF n > 10000 THEN
        RAISE EXCEPTION 'pgwork: fail_many takes at most 10000 jobs, not %', n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(cardinality(tokens), 0) <> n OR coalesce(cardinality(states), 0) <> n
       OR coalesce(cardinality(reasons), 0) <> n OR coalesce(cardinality(retry_delays), 0) <> n
       OR coalesce(cardinality(errors), 0) <> n THEN
        RAISE EXCEPTION 'pgwork: fail_many needs arrays of one length (% ids)', n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN SELECT o.n FROM unnest(job_ids) WITH ORDINALITY AS o(job_id, n) ORDER BY o.job_id, o.n LOOP
        RETURN QUERY
        SELECT job_ids[i], s.status, s.available_at
          FROM pgwork.set_state_if_held(job_ids[i], tokens[i], states[i], reasons[i], retry_delays[i], errors[i], at) AS s;
    END LOOP;
END
$$;

-- Roles that may fail jobs one at a time (the worker profile) may fail them many at a time.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.rolname
          FROM pg_proc AS p, aclexplode(p.proacl) AS x, pg_roles AS a
         WHERE p.oid = 'pgwork.set_state_if_held(bigint, uuid, text, text, double precision, text, timestamptz)'::regprocedure
           AND x.privilege_type = 'EXECUTE' AND a.oid = x.grantee AND x.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION '
                       'pgwork.fail_many(bigint[], uuid[], text[], text[], double precision[], text[], timestamptz) TO %I',
                       r.rolname);
    END LOOP;
END
$$;

-- The profiles again, as 0007 keeps them, with fail_many in the worker profile.
-- Copied whole on purpose: a migration cannot call an older version of a function it replaces.
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
                       'pgwork.fail_many(bigint[], uuid[], text[], text[], double precision[], text[], timestamptz), '
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
