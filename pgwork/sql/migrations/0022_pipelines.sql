-- pgwork schema: pipelines. Follow-up jobs written with the finish, and dependencies (a job that
-- waits until its parents succeeded). Replaces pgwork.succeed, succeed_many, cancel and retry
-- (same signatures, same grants); adds the status 'waiting', three columns on pgwork.jobs, the
-- edge table pgwork.job_edges, and the functions below.
--
-- A job enqueued `after` other jobs is inserted 'waiting' with `parents_left`, the number of its
-- parents not yet succeeded. The statement that marks a parent succeeded (succeed, succeed_many,
-- succeed_with_followups) decrements its children's count in the same transaction; a child whose
-- count reaches 0 becomes 'pending' by an ordinary UPDATE of jobs.status (and a NOTIFY wakes the
-- workers, as an enqueue does). A counter, not a re-check of every parent: releasing a child
-- costs one row update per finished parent, and a fan-in of n pages costs O(n), not O(n^2). The
-- children are found through job_edges' primary key (parent_id, child_id): O(children).
-- Concurrency: two parents of one child finishing at once serialise on the child's row, and the
-- UPDATE re-reads the count of the row version it locks; children are locked in id order so two
-- batches never wait on each other in a cycle. An enqueue locks its existing parents (in id
-- order) before it reads their status, so a parent cannot succeed unseen between that read and
-- the child's commit.
--
-- A parent that ends dead or cancelled cancels its waiting children (the trigger
-- jobs_dependents, so every path that ends a job is covered: a fail, the reaper, a cancel); the
-- child's last_error names the parent and `blocked_by` keeps its id. Retrying that parent
-- (pgwork.retry) turns the children it blocked back to 'waiting' (or keeps one cancelled, now
-- blocked by another parent that is still dead). Both cascade through grandchildren by the same
-- trigger. The trigger fires only for rows with has_children, so ordinary jobs pay nothing.
--
-- Cycles are impossible: a parent is an existing job, or an earlier job of the same call.
--
-- 'waiting' is added to the enum in this migration's transaction, where PostgreSQL forbids using
-- the new value; it therefore appears only inside PL/pgSQL bodies (planned when first run, after
-- the commit), never in an index predicate, a constraint or a SQL-language function. The index
-- for waiting jobs names the five older values instead.

ALTER TYPE pgwork.job_status ADD VALUE IF NOT EXISTS 'waiting';

ALTER TABLE pgwork.jobs
    ADD COLUMN parents_left integer,
    ADD COLUMN blocked_by bigint,
    ADD COLUMN has_children boolean NOT NULL DEFAULT false;

CREATE TABLE pgwork.job_edges (
    parent_id bigint NOT NULL REFERENCES pgwork.jobs (id) ON DELETE CASCADE,
    child_id bigint NOT NULL REFERENCES pgwork.jobs (id) ON DELETE CASCADE,
    CONSTRAINT job_edges_pkey PRIMARY KEY (parent_id, child_id),
    CONSTRAINT job_edges_not_self CHECK (parent_id <> child_id)
);
CREATE INDEX job_edges_child_idx ON pgwork.job_edges (child_id, parent_id);
REVOKE ALL ON pgwork.job_edges FROM PUBLIC;

-- Waiting jobs by type (job show, counts): status = 'waiting', written with the older values.
CREATE INDEX jobs_waiting_idx ON pgwork.jobs (job_type, id)
    WHERE status NOT IN ('pending', 'running', 'succeeded', 'dead', 'cancelled');

-- The one insert of jobs with parents, for producers (enqueue_after) and for a finish's
-- follow-ups (succeed_with_followups). `after_*` are parallel arrays, one entry per (job, parent):
-- after_ords names the job (1-based, in this call), after_ids or after_keys its parent. A key
-- names an earlier job of this call with that key, else the live unique job holding it, else the
-- job whose stored result holds it (the indexes that exist; a plain job's key is not indexed).
CREATE FUNCTION pgwork.insert_jobs(
    job_types text[], payloads jsonb[], priorities smallint[], max_attempts smallint[],
    available_ats timestamptz[], delays double precision[], keys text[], trace_contexts jsonb[],
    timeouts double precision[], after_ords integer[], after_ids bigint[], after_keys text[], now_ timestamptz)
RETURNS TABLE (ord integer, id bigint, status text)
LANGUAGE plpgsql
SECURITY DEFINER  -- granted to no one: called by the functions below
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    n integer := coalesce(cardinality(job_types), 0);
    m integer := coalesce(cardinality(after_ords), 0);
    e_ord integer[] := '{}';
    e_parent bigint[] := '{}';  -- an existing job
    e_sibling integer[] := '{}';  -- or an earlier job of this call
    i integer;
    k integer;
    found_id bigint;
    new_ids bigint[];
    bad record;
BEGIN
    IF n > 10000 THEN
        RAISE EXCEPTION 'pgwork: at most 10000 jobs with parents per call, not %', n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(cardinality(after_ids), 0) <> m OR coalesce(cardinality(after_keys), 0) <> m THEN
        RAISE EXCEPTION 'pgwork: after_ords, after_ids and after_keys need one length' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. m LOOP
        IF after_ords[i] IS NULL OR after_ords[i] NOT BETWEEN 1 AND n THEN
            RAISE EXCEPTION 'pgwork: after entry % names job %, not one of the % in this call', i, after_ords[i], n
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        found_id := after_ids[i];
        k := NULL;
        IF found_id IS NULL THEN
            IF after_keys[i] IS NULL THEN
                RAISE EXCEPTION 'pgwork: after entry % names no parent', i USING ERRCODE = 'invalid_parameter_value';
            END IF;
            SELECT max(o.n) INTO k FROM unnest(keys[1:after_ords[i] - 1]) WITH ORDINALITY AS o(key, n)
             WHERE o.key = after_keys[i];
            IF k IS NULL THEN
                SELECT j.id INTO found_id FROM pgwork.jobs AS j
                 WHERE j.idempotency_key = after_keys[i] AND j.is_unique
                   AND j.status IN ('pending', 'running', 'succeeded');
                IF found_id IS NULL THEN
                    SELECT r.job_id INTO found_id FROM pgwork.job_results AS r WHERE r.idempotency_key = after_keys[i];
                END IF;
                IF found_id IS NULL THEN
                    RAISE EXCEPTION 'pgwork: after: key % names no earlier job of this call, no live unique job and no stored result',
                        quote_literal(left(after_keys[i], 200))
                        USING ERRCODE = 'invalid_parameter_value',
                              HINT = 'pass the parent''s id, or enqueue the parent with unique=True';
                END IF;
            END IF;
        END IF;
        e_ord := e_ord || after_ords[i];
        e_parent := e_parent || found_id;
        e_sibling := e_sibling || k;
    END LOOP;

    -- Lock the existing parents in id order (and mark them as having children), then read their
    -- status: a parent finishing now is waited for, and then seen as it ended.
    PERFORM 1 FROM pgwork.jobs AS j
      WHERE j.id IN (SELECT DISTINCT p FROM unnest(e_parent) AS p WHERE p IS NOT NULL)
      ORDER BY j.id FOR NO KEY UPDATE;
    SELECT x.p AS id, j.status::text AS status, j.job_type INTO bad
      FROM unnest(e_parent) AS x(p) LEFT JOIN pgwork.jobs AS j ON j.id = x.p
     WHERE x.p IS NOT NULL AND (j.id IS NULL OR j.status IN ('dead', 'cancelled'))
     ORDER BY x.p LIMIT 1;
    IF FOUND THEN
        IF bad.status IS NULL THEN
            RAISE EXCEPTION 'pgwork: after: there is no job %', bad.id
                USING ERRCODE = 'invalid_parameter_value', HINT = 'parents must exist before their children';
        END IF;
        RAISE EXCEPTION 'pgwork: after: job % (%) is %, so this job could never run', bad.id, bad.job_type, bad.status
            USING ERRCODE = 'invalid_parameter_value', HINT = 'retry the parent first (pgwork retry), or leave it out';
    END IF;
    UPDATE pgwork.jobs AS j SET has_children = true
     WHERE j.id IN (SELECT DISTINCT p FROM unnest(e_parent) AS p WHERE p IS NOT NULL) AND NOT j.has_children;

    WITH edges AS (
        SELECT DISTINCT x.o, x.p, x.s FROM unnest(e_ord, e_parent, e_sibling) AS x(o, p, s)
    ), waits AS (
        -- An earlier job of this call has not succeeded yet; an existing parent may have.
        SELECT e.o, count(*) FILTER (WHERE e.s IS NOT NULL OR j.status <> 'succeeded')::integer AS left_
          FROM edges AS e LEFT JOIN pgwork.jobs AS j ON j.id = e.p
         GROUP BY e.o
    ), ins AS (
        INSERT INTO pgwork.jobs AS j (job_type, payload, priority, max_attempts, available_at, idempotency_key,
                                      trace_context, timeout_seconds, status, parents_left, has_children)
        SELECT t.job_type, t.payload, t.priority, t.max_attempts,
               coalesce(t.available_at, now_ + make_interval(secs => t.delay)), t.key, t.trace_context, t.timeout,
               (CASE WHEN w.left_ > 0 THEN 'waiting' ELSE 'pending' END)::pgwork.job_status,
               w.left_, coalesce(t.o = ANY (e_sibling), false)
          FROM unnest(job_types, payloads, priorities, max_attempts, available_ats, delays, keys, trace_contexts,
                      timeouts) WITH ORDINALITY
                   AS t(job_type, payload, priority, max_attempts, available_at, delay, key, trace_context, timeout, o)
          LEFT JOIN waits AS w ON w.o = t.o
         ORDER BY t.o
        RETURNING j.id
    )
    SELECT array_agg(ins.id ORDER BY ins.id) INTO new_ids FROM ins;

    INSERT INTO pgwork.job_edges (parent_id, child_id)
    SELECT DISTINCT coalesce(x.p, new_ids[x.s]), new_ids[x.o]
      FROM unnest(e_ord, e_parent, e_sibling) AS x(o, p, s);

    RETURN QUERY
    SELECT o.n::integer, o.id, j.status::text
      FROM unnest(new_ids) WITH ORDINALITY AS o(id, n) JOIN pgwork.jobs AS j ON j.id = o.id
     ORDER BY o.n;
END
$$;

-- The children of jobs that just succeeded (in the caller's transaction): each one's count of
-- parents left goes down; those at 0 become pending and the workers are woken.
CREATE FUNCTION pgwork.release_children(parent_ids bigint[], now_ timestamptz)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER  -- granted to no one: called by the functions below
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
DECLARE
    released integer;
BEGIN
    IF coalesce(cardinality(parent_ids), 0) = 0 THEN
        RETURN 0;
    END IF;
    -- In id order: two finishing batches never wait on each other's children in a cycle.
    PERFORM 1 FROM pgwork.jobs AS j
      WHERE j.id IN (SELECT e.child_id FROM pgwork.job_edges AS e WHERE e.parent_id = ANY (parent_ids))
        AND j.parents_left > 0
      ORDER BY j.id FOR NO KEY UPDATE;
    WITH c AS (
        SELECT e.child_id, count(*)::integer AS n FROM pgwork.job_edges AS e
         WHERE e.parent_id = ANY (parent_ids) GROUP BY e.child_id
    ), changed AS (
        UPDATE pgwork.jobs AS j
           SET parents_left = greatest(j.parents_left - c.n, 0),
               status = CASE WHEN j.status = 'waiting' AND j.parents_left - c.n <= 0
                             THEN 'pending'::pgwork.job_status ELSE j.status END,
               available_at = CASE WHEN j.status = 'waiting' AND j.parents_left - c.n <= 0
                                   THEN greatest(j.available_at, now_) ELSE j.available_at END
          FROM c
         WHERE j.id = c.child_id AND j.parents_left > 0
        RETURNING j.job_type, j.status
    ), woken AS (
        SELECT DISTINCT ch.job_type FROM changed AS ch WHERE ch.status = 'pending'
    )
    SELECT count(pg_notify('pgwork_jobs', w.job_type)) INTO released FROM woken AS w;
    RETURN released;
END
$$;

-- A parent ended dead or cancelled, or was retried: its waiting children are cancelled, or the
-- children it had blocked wait again. Cascades through grandchildren by firing again on them.
CREATE FUNCTION pgwork.jobs_dependents()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
BEGIN
    IF NEW.status IN ('dead', 'cancelled') THEN
        UPDATE pgwork.jobs AS c
           SET status = 'cancelled',
               completed_at = now(),
               blocked_by = NEW.id,
               last_error = right(coalesce(c.last_error || ' ', '')
                                  || format('[cancelled: it waits for job %s (%s), which ended %s]',
                                            NEW.id, NEW.job_type, NEW.status), 8000)
          FROM pgwork.job_edges AS e
         WHERE e.parent_id = NEW.id AND c.id = e.child_id AND c.status = 'waiting';
    ELSIF OLD.status IN ('dead', 'cancelled') AND NEW.status IN ('pending', 'waiting') THEN
        UPDATE pgwork.jobs AS c
           SET status = CASE WHEN o.other IS NULL THEN 'waiting'::pgwork.job_status ELSE c.status END,
               completed_at = CASE WHEN o.other IS NULL THEN NULL ELSE c.completed_at END,
               blocked_by = o.other,
               last_error = right(coalesce(c.last_error || ' ', '')
                                  || CASE WHEN o.other IS NULL
                                          THEN format('[waiting again: job %s was retried]', NEW.id)
                                          ELSE format('[job %s was retried, but job %s it waits for is still %s]',
                                                      NEW.id, o.other, o.other_status) END, 8000)
          FROM pgwork.job_edges AS e
          LEFT JOIN LATERAL (
              SELECT p.id AS other, p.status::text AS other_status
                FROM pgwork.job_edges AS e2 JOIN pgwork.jobs AS p ON p.id = e2.parent_id
               WHERE e2.child_id = e.child_id AND e2.parent_id <> NEW.id AND p.status IN ('dead', 'cancelled')
               ORDER BY p.id LIMIT 1) AS o ON true
         WHERE e.parent_id = NEW.id AND c.id = e.child_id AND c.status = 'cancelled' AND c.blocked_by = NEW.id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_dependents AFTER UPDATE OF status ON pgwork.jobs
    FOR EACH ROW
    WHEN (NEW.has_children AND OLD.status IS DISTINCT FROM NEW.status
          AND (NEW.status IN ('dead', 'cancelled') OR OLD.status IN ('dead', 'cancelled')))
    EXECUTE FUNCTION pgwork.jobs_dependents();

-- Producers: enqueue jobs that wait for others.
CREATE FUNCTION pgwork.enqueue_after(
    job_types text[], payloads jsonb[], priorities smallint[], max_attempts smallint[],
    available_ats timestamptz[], delays double precision[], keys text[], trace_contexts jsonb[],
    timeouts double precision[], after_ords integer[], after_ids bigint[], after_keys text[],
    at timestamptz DEFAULT NULL)
RETURNS TABLE (ord integer, id bigint, status text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM pgwork.insert_jobs(job_types, payloads, priorities, max_attempts, available_ats, delays, keys,
                                     trace_contexts, timeouts, after_ords, after_ids, after_keys,
                                     CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END);
END
$$;

-- The finishes: as before (migration 14 and earlier), and then the children of what succeeded
-- are released in the same transaction.
CREATE OR REPLACE FUNCTION pgwork.succeed(job_id bigint, token uuid, result jsonb, at timestamptz DEFAULT NULL)
RETURNS TABLE (fenced bigint, inserted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    n_held bigint;
    n_written bigint;
    parent boolean;
BEGIN
    WITH held AS (
        UPDATE pgwork.jobs AS j
           SET status = 'succeeded',
               completed_at = now_,
               lease_token = NULL,
               lease_expires_at = NULL,
               last_error = CASE WHEN j.cancel_requested_at IS NULL THEN j.last_error
                                 ELSE right(coalesce(j.last_error || ' ', '') || pgwork.cancel_too_late(j.cancel_requested_at), 8000)
                            END
         WHERE j.id = job_id AND j.lease_token = token AND j.status::text = 'running'  -- by key: see 0002
        RETURNING j.id, j.job_type, j.idempotency_key, j.lease_owner, j.has_children
    ), written AS (
        INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
        SELECT h.idempotency_key, h.id, h.job_type, h.lease_owner, result FROM held AS h
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM written), (SELECT bool_or(h.has_children) FROM held AS h)
      INTO n_held, n_written, parent;
    IF parent THEN
        PERFORM pgwork.release_children(ARRAY[job_id], now_);
    END IF;
    fenced := n_held;
    inserted := n_written;
    RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION pgwork.succeed_many(job_ids bigint[], tokens uuid[], results jsonb[], at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint, inserted boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    held_ids bigint[];
    created boolean[];
    parents bigint[];
BEGIN
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
         WHERE j.id = i.id AND j.lease_token = i.token AND j.status::text = 'running'  -- by key: see 0002
        RETURNING j.id, j.job_type, j.idempotency_key, j.lease_owner, i.result, j.has_children
    ), written AS (
        INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
        SELECT h.idempotency_key, h.id, h.job_type, h.lease_owner, h.result FROM held AS h ORDER BY h.id
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING job_id
    )
    SELECT array_agg(h.id), array_agg(EXISTS (SELECT 1 FROM written AS w WHERE w.job_id = h.id)),
           array_agg(h.id) FILTER (WHERE h.has_children)
      INTO held_ids, created, parents
      FROM held AS h;
    IF parents IS NOT NULL THEN
        PERFORM pgwork.release_children(parents, now_);
    END IF;
    RETURN QUERY SELECT u.id, u.inserted FROM unnest(held_ids, created) AS u(id, inserted);
END
$$;

-- succeed_many, and the follow-up jobs each success hands back, in one transaction: a job's
-- follow-ups are inserted only when this call marked it succeeded and wrote its result (a lost
-- lease, a cancel that won, or a result another run of its key already wrote create none).
-- f_parents says which finishing job each follow-up belongs to (grouped, in order); after_ords
-- count follow-ups from 1 across the whole call, and a key names a sibling follow-up of the
-- same finishing job.
CREATE FUNCTION pgwork.succeed_with_followups(
    job_ids bigint[], tokens uuid[], results jsonb[],
    f_parents bigint[], f_job_types text[], f_payloads jsonb[], f_priorities smallint[], f_max_attempts smallint[],
    f_available_ats timestamptz[], f_delays double precision[], f_keys text[], f_trace_contexts jsonb[],
    f_timeouts double precision[], after_ords integer[], after_ids bigint[], after_keys text[],
    at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint, inserted boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    done record;
    lo integer;
    hi integer;
    a integer[];
    nf integer := coalesce(cardinality(f_parents), 0);
BEGIN
    IF nf > 10000 THEN
        RAISE EXCEPTION 'pgwork: at most 10000 follow-up jobs per finish, not %', nf USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR done IN SELECT s.id, s.inserted FROM pgwork.succeed_many(job_ids, tokens, results, at) AS s ORDER BY s.id LOOP
        id := done.id;
        inserted := done.inserted;
        RETURN NEXT;
        CONTINUE WHEN NOT done.inserted;
        SELECT min(o.n), max(o.n) INTO lo, hi FROM unnest(f_parents) WITH ORDINALITY AS o(p, n) WHERE o.p = done.id;
        CONTINUE WHEN lo IS NULL;
        IF EXISTS (SELECT 1 FROM unnest(f_parents[lo:hi]) AS p WHERE p IS DISTINCT FROM done.id) THEN
            RAISE EXCEPTION 'pgwork: follow-ups must be grouped by the job they follow' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        a := ARRAY(SELECT o.n FROM unnest(after_ords) WITH ORDINALITY AS o(f, n) WHERE o.f BETWEEN lo AND hi ORDER BY o.n);
        PERFORM pgwork.insert_jobs(
            f_job_types[lo:hi], f_payloads[lo:hi], f_priorities[lo:hi], f_max_attempts[lo:hi], f_available_ats[lo:hi],
            f_delays[lo:hi], f_keys[lo:hi], f_trace_contexts[lo:hi], f_timeouts[lo:hi],
            ARRAY(SELECT after_ords[x] - lo + 1 FROM unnest(a) AS x),
            ARRAY(SELECT after_ids[x] FROM unnest(a) AS x),
            ARRAY(SELECT after_keys[x] FROM unnest(a) AS x),
            now_);
    END LOOP;
END
$$;

-- A waiting job can be cancelled like a pending one (reported as pending).
CREATE OR REPLACE FUNCTION pgwork.cancel(job_ids bigint[], at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint, was text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = 'cancelled',
           completed_at = now_,
           last_error = right(coalesce(j.last_error || ' ', '') || format('[cancelled at %s]', now_), 8000)
     WHERE j.id = ANY (job_ids) AND j.status IN ('pending', 'waiting')
    RETURNING j.id, 'pending'::text;
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET cancel_requested_at = coalesce(j.cancel_requested_at, now_)
     WHERE j.id = ANY (job_ids) AND j.status = 'running'
    RETURNING j.id, 'running'::text;
END
$$;

-- A retried job that still has parents to wait for waits again instead of running early.
CREATE OR REPLACE FUNCTION pgwork.retry(job_ids bigint[], new_max_attempts smallint, at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET status = CASE WHEN coalesce(j.parents_left, 0) > 0 THEN 'waiting'::pgwork.job_status
                         ELSE 'pending'::pgwork.job_status END,
           available_at = now_,
           completed_at = NULL,
           started_at = NULL,
           lease_owner = NULL,
           blocked_by = NULL,
           max_attempts = coalesce(new_max_attempts, j.max_attempts),
           last_error = right(coalesce(j.last_error || ' ', '') || format('[requeued by hand at %s]', now_), 8000)
     WHERE j.id = ANY (job_ids) AND j.status IN ('dead', 'cancelled')
    RETURNING j.id;
END
$$;

-- A child's parents and their results: what a merge reads (producers and workers, who may read
-- contents; migration 16's rule).
CREATE FUNCTION pgwork.parent_results(job_id bigint)
RETURNS TABLE (parent_id bigint, job_type text, status text, result jsonb)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT p.id, p.job_type, p.status::text, CASE WHEN p.status = 'succeeded' THEN r.result END
      FROM pgwork.job_edges AS e
      JOIN pgwork.jobs AS p ON p.id = e.parent_id
      LEFT JOIN pgwork.job_results AS r ON r.idempotency_key = p.idempotency_key
     WHERE e.child_id = parent_results.job_id
     ORDER BY p.id;
END
$$;

-- `pgwork job show`: a job's parents and children (ids, types, statuses; no contents), the first
-- `lim` of each, for any reader.
CREATE FUNCTION pgwork.job_family(job_id bigint, lim integer)
RETURNS TABLE (relation text, id bigint, job_type text, status text, blocked_by bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    (SELECT 'parent'::text, p.id, p.job_type, p.status::text, p.blocked_by
       FROM pgwork.job_edges AS e JOIN pgwork.jobs AS p ON p.id = e.parent_id
      WHERE e.child_id = job_family.job_id ORDER BY e.parent_id LIMIT lim)
    UNION ALL
    (SELECT 'child'::text, c.id, c.job_type, c.status::text, c.blocked_by
       FROM pgwork.job_edges AS e JOIN pgwork.jobs AS c ON c.id = e.child_id
      WHERE e.parent_id = job_family.job_id ORDER BY e.child_id LIMIT lim);
END
$$;

-- Waiting jobs by type (capped), for stats: never part of the backlog the operator scales on.
CREATE FUNCTION pgwork.waiting_counts(cap integer DEFAULT NULL)
RETURNS TABLE (job_type text, waiting bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE types(t) AS (
        SELECT min(j.job_type) FROM pgwork.jobs AS j WHERE j.status = 'waiting'
        UNION ALL
        SELECT (SELECT min(j.job_type) FROM pgwork.jobs AS j WHERE j.status = 'waiting' AND j.job_type > w.t)
          FROM types AS w WHERE w.t IS NOT NULL
    )
    SELECT w.t, (SELECT count(*) FROM (SELECT 1 FROM pgwork.jobs AS j
                                        WHERE j.status = 'waiting' AND j.job_type = w.t LIMIT cap) AS n)
      FROM types AS w WHERE w.t IS NOT NULL ORDER BY w.t;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
SELECT pgwork.add_profile_privilege(
    'producer',
    'EXECUTE ON FUNCTION pgwork.enqueue_after(text[], jsonb[], smallint[], smallint[], timestamptz[], '
    || 'double precision[], text[], jsonb[], double precision[], integer[], bigint[], text[], timestamptz)');
SELECT pgwork.add_profile_privilege('producer', 'EXECUTE ON FUNCTION pgwork.parent_results(bigint)');
SELECT pgwork.add_profile_privilege(
    'worker',
    'EXECUTE ON FUNCTION pgwork.succeed_with_followups(bigint[], uuid[], jsonb[], bigint[], text[], jsonb[], '
    || 'smallint[], smallint[], timestamptz[], double precision[], text[], jsonb[], double precision[], integer[], '
    || 'bigint[], text[], timestamptz)');
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.job_family(bigint, integer)');
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.waiting_counts(integer)');
