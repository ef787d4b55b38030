-- pgwork schema: a per-job policy for a parent that fails (issue 27 item 2). Replaces
-- pgwork.insert_jobs, pgwork.enqueue_after and pgwork.succeed_with_followups (migration 22; each
-- gains one array, so the old signatures are dropped with their grants and the new ones granted
-- to the same profiles) and the trigger function pgwork.jobs_dependents (same trigger). Adds the
-- column pgwork.jobs.runs_after_failure. Everything else, the producer's rights included, is as
-- before.
--
-- on_parent_failure = 'cancel' (the default, runs_after_failure false): as in migration 22, a
-- parent that ends dead or cancelled cancels its waiting children, and retrying it revives them.
-- on_parent_failure = 'run' (runs_after_failure true): a parent that ends dead or cancelled
-- has ended, as one that succeeded has: the child's parents_left goes down by one in the same
-- transaction, and the child becomes pending (waking the workers) once every parent has ended one
-- way or the other. It reads its parents with pgwork.parent_results, which gives every parent's
-- status and only the succeeded ones' results. A parent already dead or cancelled when such a
-- child is enqueued counts as ended (it is refused only for a 'cancel' child).
--
-- Retrying a failed parent of a 'run' child that is still waiting counts that parent again
-- (parents_left + 1): the child then waits for the retried run. A child that already left
-- 'waiting' (pending, running, finished) is left alone: it has run or will run once, with what
-- it saw, and the retried parent's later success finds its parents_left at 0 and changes nothing.

ALTER TABLE pgwork.jobs ADD COLUMN runs_after_failure boolean NOT NULL DEFAULT false;

SELECT pgwork.drop_profile_privilege(
    'producer',
    'EXECUTE ON FUNCTION pgwork.enqueue_after(text[], jsonb[], smallint[], smallint[], timestamptz[], '
    || 'double precision[], text[], jsonb[], double precision[], integer[], bigint[], text[], timestamptz)');
SELECT pgwork.drop_profile_privilege(
    'worker',
    'EXECUTE ON FUNCTION pgwork.succeed_with_followups(bigint[], uuid[], jsonb[], bigint[], text[], jsonb[], '
    || 'smallint[], smallint[], timestamptz[], double precision[], text[], jsonb[], double precision[], integer[], '
    || 'bigint[], text[], timestamptz)');
DROP FUNCTION pgwork.enqueue_after(text[], jsonb[], smallint[], smallint[], timestamptz[], double precision[], text[],
                                   jsonb[], double precision[], integer[], bigint[], text[], timestamptz);
DROP FUNCTION pgwork.succeed_with_followups(bigint[], uuid[], jsonb[], bigint[], text[], jsonb[], smallint[],
                                            smallint[], timestamptz[], double precision[], text[], jsonb[],
                                            double precision[], integer[], bigint[], text[], timestamptz);
DROP FUNCTION pgwork.insert_jobs(text[], jsonb[], smallint[], smallint[], timestamptz[], double precision[], text[],
                                 jsonb[], double precision[], integer[], bigint[], text[], timestamptz);

-- As in migration 22, and `runs` (one per job; NULL or false: 'cancel') says which jobs run
-- anyway: their parents may already be dead or cancelled, and those count as ended.
CREATE FUNCTION pgwork.insert_jobs(
    job_types text[], payloads jsonb[], priorities smallint[], max_attempts smallint[],
    available_ats timestamptz[], delays double precision[], keys text[], trace_contexts jsonb[],
    timeouts double precision[], after_ords integer[], after_ids bigint[], after_keys text[], runs boolean[],
    now_ timestamptz)
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
      FROM unnest(e_parent, e_ord) AS x(p, o) LEFT JOIN pgwork.jobs AS j ON j.id = x.p
     WHERE x.p IS NOT NULL
       AND (j.id IS NULL OR (j.status IN ('dead', 'cancelled') AND NOT coalesce(runs[x.o], false)))
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
        -- An earlier job of this call has not succeeded yet; an existing parent may have, and for
        -- a job that runs anyway one that ended dead or cancelled has ended too.
        SELECT e.o, count(*) FILTER (WHERE e.s IS NOT NULL OR NOT (j.status = 'succeeded'
                                       OR (coalesce(runs[e.o], false) AND j.status IN ('dead', 'cancelled'))))::integer AS left_
          FROM edges AS e LEFT JOIN pgwork.jobs AS j ON j.id = e.p
         GROUP BY e.o
    ), ins AS (
        INSERT INTO pgwork.jobs AS j (job_type, payload, priority, max_attempts, available_at, idempotency_key,
                                      trace_context, timeout_seconds, status, parents_left, has_children,
                                      runs_after_failure)
        SELECT t.job_type, t.payload, t.priority, t.max_attempts,
               coalesce(t.available_at, now_ + make_interval(secs => t.delay)), t.key, t.trace_context, t.timeout,
               (CASE WHEN w.left_ > 0 THEN 'waiting' ELSE 'pending' END)::pgwork.job_status,
               w.left_, coalesce(t.o = ANY (e_sibling), false), coalesce(runs[t.o], false)
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

CREATE FUNCTION pgwork.enqueue_after(
    job_types text[], payloads jsonb[], priorities smallint[], max_attempts smallint[],
    available_ats timestamptz[], delays double precision[], keys text[], trace_contexts jsonb[],
    timeouts double precision[], after_ords integer[], after_ids bigint[], after_keys text[],
    runs boolean[], at timestamptz DEFAULT NULL)
RETURNS TABLE (ord integer, id bigint, status text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM pgwork.insert_jobs(job_types, payloads, priorities, max_attempts, available_ats, delays, keys,
                                     trace_contexts, timeouts, after_ords, after_ids, after_keys, runs,
                                     CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END);
END
$$;

CREATE FUNCTION pgwork.succeed_with_followups(
    job_ids bigint[], tokens uuid[], results jsonb[],
    f_parents bigint[], f_job_types text[], f_payloads jsonb[], f_priorities smallint[], f_max_attempts smallint[],
    f_available_ats timestamptz[], f_delays double precision[], f_keys text[], f_trace_contexts jsonb[],
    f_timeouts double precision[], after_ords integer[], after_ids bigint[], after_keys text[],
    f_runs boolean[], at timestamptz DEFAULT NULL)
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
            f_runs[lo:hi],
            now_);
    END LOOP;
END
$$;

-- A parent ended dead or cancelled: its waiting 'cancel' children are cancelled (as before) and
-- its waiting 'run' children count it as ended (released at 0). A parent retried: the 'cancel'
-- children it blocked wait again (as before) and its 'run' children still waiting count it again.
CREATE OR REPLACE FUNCTION pgwork.jobs_dependents()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
AS $$
DECLARE
    woken bigint;
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
         WHERE e.parent_id = NEW.id AND c.id = e.child_id AND c.status = 'waiting' AND NOT c.runs_after_failure;
        IF OLD.status NOT IN ('dead', 'cancelled') THEN
            -- In id order, as release_children: never a lock cycle with a finishing batch.
            PERFORM 1 FROM pgwork.jobs AS c
              WHERE c.id IN (SELECT e.child_id FROM pgwork.job_edges AS e WHERE e.parent_id = NEW.id)
                AND c.runs_after_failure AND c.parents_left > 0
              ORDER BY c.id FOR NO KEY UPDATE;
            WITH ch AS (
                UPDATE pgwork.jobs AS c
                   SET parents_left = c.parents_left - 1,
                       status = CASE WHEN c.parents_left <= 1 THEN 'pending'::pgwork.job_status ELSE c.status END,
                       available_at = CASE WHEN c.parents_left <= 1 THEN greatest(c.available_at, now())
                                           ELSE c.available_at END,
                       last_error = right(coalesce(c.last_error || ' ', '')
                                          || format('[job %s (%s) it waits for ended %s; it runs anyway]',
                                                    NEW.id, NEW.job_type, NEW.status), 8000)
                  FROM pgwork.job_edges AS e
                 WHERE e.parent_id = NEW.id AND c.id = e.child_id AND c.status = 'waiting'
                   AND c.runs_after_failure AND c.parents_left > 0
                RETURNING c.job_type, c.status
            )
            SELECT count(pg_notify('pgwork_jobs', w.job_type)) INTO woken
              FROM (SELECT DISTINCT ch.job_type FROM ch WHERE ch.status = 'pending') AS w;
        END IF;
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
        UPDATE pgwork.jobs AS c
           SET parents_left = c.parents_left + 1,
               last_error = right(coalesce(c.last_error || ' ', '')
                                  || format('[job %s was retried: it waits for it again]', NEW.id), 8000)
          FROM pgwork.job_edges AS e
         WHERE e.parent_id = NEW.id AND c.id = e.child_id AND c.status = 'waiting' AND c.runs_after_failure;
    END IF;
    RETURN NULL;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
SELECT pgwork.add_profile_privilege(
    'producer',
    'EXECUTE ON FUNCTION pgwork.enqueue_after(text[], jsonb[], smallint[], smallint[], timestamptz[], '
    || 'double precision[], text[], jsonb[], double precision[], integer[], bigint[], text[], boolean[], timestamptz)');
SELECT pgwork.add_profile_privilege(
    'worker',
    'EXECUTE ON FUNCTION pgwork.succeed_with_followups(bigint[], uuid[], jsonb[], bigint[], text[], jsonb[], '
    || 'smallint[], smallint[], timestamptz[], double precision[], text[], jsonb[], double precision[], integer[], '
    || 'bigint[], text[], boolean[], timestamptz)');
