-- pgwork schema, version 9: the profiles as rows.
--
-- Up to version 8 the profiles lived in the body of pgwork.grant_profiles, and each migration that
-- added a job-life function copied that whole function (a migration cannot call the version it
-- replaces) and found the roles to extend by reading the ACL of a sibling function. Here a
-- profile is a set of rows in pgwork.profile_privileges, one GRANT target each, and the roles
-- holding a profile are rows in pgwork.profile_members, written by grant_profiles. A later
-- migration adds a privilege with one call:
--     SELECT pgwork.add_profile_privilege('worker', 'EXECUTE ON FUNCTION pgwork.f(bigint, uuid)');
-- which records it and grants it at once to every role holding that profile (directly or through
-- one that includes it: worker includes producer includes reader). Both tables are the schema
-- owner's: no profile can read or change them, so no role can grant itself more.

CREATE TABLE pgwork.profile_privileges (
    profile text NOT NULL CHECK (profile IN ('reader', 'producer', 'worker', 'reaper', 'maintainer')),
    -- One privilege on one object of schema pgwork, as it follows GRANT: the shape is checked so
    -- that a row can name nothing outside pgwork and carry no second clause.
    privilege text NOT NULL CHECK (
        privilege ~ '^[A-Z]+( \([a-z_, ]+\))?(, [A-Z]+( \([a-z_, ]+\))?)* ON '
                    '(SCHEMA pgwork|(FUNCTION )?pgwork\.[a-z_]+(\([a-z ,\[\]]*\))?)$'
    ),
    PRIMARY KEY (profile, privilege)
);

CREATE TABLE pgwork.profile_members (
    role oid NOT NULL,  -- pg_roles.oid: a role renamed keeps its profiles, one dropped is skipped
    profile text NOT NULL CHECK (profile IN ('reader', 'producer', 'worker', 'reaper', 'maintainer')),
    PRIMARY KEY (role, profile)
);

-- What version 8's grant_profiles granted, one object per row.
INSERT INTO pgwork.profile_privileges (profile, privilege) VALUES
    ('reader', 'USAGE ON SCHEMA pgwork'),
    ('reader', 'SELECT ON pgwork.schema_version'),
    ('reader', 'SELECT ON pgwork.stats'),
    ('reader', 'SELECT ON pgwork.running'),
    ('reader', 'SELECT ON pgwork.retrying'),
    ('reader', 'SELECT ON pgwork.dead'),
    ('reader', 'EXECUTE ON FUNCTION pgwork.queue_stats(text[], timestamptz)'),
    ('reader', 'EXECUTE ON FUNCTION pgwork.backlog(text[], integer, timestamptz)'),
    ('reader', 'EXECUTE ON FUNCTION pgwork.running_jobs(timestamptz)'),
    ('reader', 'EXECUTE ON FUNCTION pgwork.retrying_jobs(timestamptz)'),
    ('reader', 'EXECUTE ON FUNCTION pgwork.dead_jobs()'),
    ('reader', 'EXECUTE ON FUNCTION pgwork.running_by_owner(text[])'),
    ('reader', 'EXECUTE ON FUNCTION pgwork.job_status(bigint)'),
    ('producer', 'INSERT (job_type, payload, priority, max_attempts, available_at, idempotency_key, trace_context), '
                 'SELECT (id) ON pgwork.jobs'),
    ('producer', 'EXECUTE ON FUNCTION pgwork.job_outcome(bigint)'),
    ('worker', 'EXECUTE ON FUNCTION pgwork.claim(text, text[], integer, double precision, timestamptz)'),
    ('worker', 'EXECUTE ON FUNCTION pgwork.heartbeat(bigint[], uuid[], double precision, timestamptz)'),
    ('worker', 'EXECUTE ON FUNCTION pgwork.succeed(bigint, uuid, jsonb, timestamptz)'),
    ('worker', 'EXECUTE ON FUNCTION pgwork.succeed_many(bigint[], uuid[], jsonb[], timestamptz)'),
    ('worker', 'EXECUTE ON FUNCTION pgwork.set_state_if_held(bigint, uuid, text, text, double precision, text, timestamptz)'),
    ('worker', 'EXECUTE ON FUNCTION pgwork.fail_many(bigint[], uuid[], text[], text[], double precision[], text[], timestamptz)'),
    ('worker', 'EXECUTE ON FUNCTION pgwork.release(bigint, uuid, text, timestamptz)'),
    ('worker', 'EXECUTE ON FUNCTION pgwork.acknowledge_cancel(bigint, uuid, text, timestamptz)'),
    ('reaper', 'EXECUTE ON FUNCTION pgwork.reap(integer, timestamptz)'),
    ('reaper', 'EXECUTE ON FUNCTION pgwork.prune(text[], double precision, integer, timestamptz)'),
    ('reaper', 'EXECUTE ON FUNCTION pgwork.prune_batch(text, double precision, integer, timestamptz, timestamptz)'),
    ('maintainer', 'EXECUTE ON FUNCTION pgwork.retry(bigint[], smallint, timestamptz)'),
    ('maintainer', 'EXECUTE ON FUNCTION pgwork.cancel(bigint[], timestamptz)');

-- The profiles each profile stands for (a worker also enqueues and reads).
CREATE FUNCTION pgwork.profile_closure(profiles text[]) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pgwork, pg_temp AS $$
DECLARE
    wanted text[] := ARRAY[]::text[];
    expanded text[];
    profile text;
BEGIN
    FOREACH profile IN ARRAY coalesce(profiles, ARRAY[]::text[]) LOOP
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
    -- In the profiles' own order, each once.
    RETURN ARRAY(SELECT o.p FROM unnest(ARRAY['reader', 'producer', 'worker', 'reaper', 'maintainer'])
                                 WITH ORDINALITY AS o(p, n)
                  WHERE o.p = ANY (wanted) ORDER BY o.n);
END
$$;

-- Roles that hold profiles today: read off the privileges version 8 gave each profile alone.
INSERT INTO pgwork.profile_members (role, profile)
SELECT DISTINCT x.grantee, u.profile
  FROM (VALUES ('reader', 'pgwork.job_status(bigint)'),
               ('producer', 'pgwork.job_outcome(bigint)'),
               ('worker', 'pgwork.claim(text, text[], integer, double precision, timestamptz)'),
               ('reaper', 'pgwork.reap(integer, timestamptz)'),
               ('maintainer', 'pgwork.retry(bigint[], smallint, timestamptz)')) AS m(profile, fn),
       pg_proc AS p, aclexplode(p.proacl) AS x,
       unnest(pgwork.profile_closure(ARRAY[m.profile])) AS u(profile)
 WHERE p.oid = m.fn::regprocedure AND x.privilege_type = 'EXECUTE' AND x.grantee <> p.proowner
   AND x.grantee <> 0;  -- 0 is PUBLIC

CREATE OR REPLACE FUNCTION pgwork.grant_profiles(grantee text, profiles text[]) RETURNS text[]
LANGUAGE plpgsql SET search_path = pg_catalog, pgwork, pg_temp AS $$
DECLARE
    wanted text[];
    grantee_oid oid;
    item record;
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
    wanted := pgwork.profile_closure(profiles);
    grantee_oid := (SELECT r.oid FROM pg_roles AS r WHERE r.rolname = grantee);

    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA pgwork FROM %I', grantee);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgwork FROM %I', grantee);
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgwork FROM %I', grantee);
    EXECUTE format('REVOKE ALL ON SCHEMA pgwork FROM %I', grantee);

    -- Members of roles since dropped go too, so a reused oid inherits nothing.
    DELETE FROM pgwork.profile_members AS m
     WHERE m.role = grantee_oid OR NOT EXISTS (SELECT 1 FROM pg_roles AS r WHERE r.oid = m.role);
    INSERT INTO pgwork.profile_members (role, profile) SELECT grantee_oid, u.p FROM unnest(wanted) AS u(p);
    FOR item IN SELECT v.privilege FROM pgwork.profile_privileges AS v WHERE v.profile = ANY (wanted)
                 ORDER BY v.profile, v.privilege LOOP
        EXECUTE format('GRANT %s TO %I', item.privilege, grantee);
    END LOOP;
    RETURN wanted;
END
$$;

-- Records a privilege of a profile and grants it to every role that holds the profile now.
-- Idempotent: after a DROP and CREATE of a function, calling it again grants the new one.
CREATE FUNCTION pgwork.add_profile_privilege(profile text, privilege text) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    member record;
    granted integer := 0;
BEGIN
    INSERT INTO pgwork.profile_privileges AS v (profile, privilege) VALUES (profile, privilege)
        ON CONFLICT DO NOTHING;
    FOR member IN SELECT r.rolname FROM pgwork.profile_members AS m JOIN pg_roles AS r ON r.oid = m.role
                   WHERE m.profile = profile ORDER BY r.rolname LOOP
        EXECUTE format('GRANT %s TO %I', privilege, member.rolname);
        granted := granted + 1;
    END LOOP;
    RETURN granted;
END
$$;

-- Forgets a privilege of a profile and revokes it from the roles holding the profile: call it
-- before dropping or changing the signature of what it names (an object already gone has
-- nothing left to revoke).
CREATE FUNCTION pgwork.drop_profile_privilege(profile text, privilege text) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    member record;
    revoked integer := 0;
BEGIN
    DELETE FROM pgwork.profile_privileges AS v WHERE v.profile = profile AND v.privilege = privilege;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgwork: profile % has no privilege %', quote_literal(profile), quote_literal(privilege)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR member IN SELECT r.rolname FROM pgwork.profile_members AS m JOIN pg_roles AS r ON r.oid = m.role
                   WHERE m.profile = profile ORDER BY r.rolname LOOP
        BEGIN
            EXECUTE format('REVOKE %s FROM %I', privilege, member.rolname);
        EXCEPTION WHEN undefined_function OR undefined_table OR undefined_column THEN
            NULL;
        END;
        revoked := revoked + 1;
    END LOOP;
    RETURN revoked;
END
$$;

REVOKE ALL ON pgwork.profile_privileges, pgwork.profile_members FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
