-- pgwork schema, version 16: one job at a glance (`pgwork job show`), and uniqueness at enqueue.
-- Replaces nothing: adds a column, an index and four functions.
-- (Also: when a job type was last taken by a worker, for the orphan-type notes.)
--
-- job_detail / job_contents. `pgwork job show ID` needs a job's whole row, but the reader profile
-- has no right on pgwork.jobs (it sees no payload) and the producer only SELECT (id). So a
-- SECURITY DEFINER function per audience, each one indexed lookup by primary key:
--   * job_detail (reader): everything about the job's life and none of its contents: status,
--     attempts, timings, the effective lease and heartbeat (version 15), progress, the checkpoint's
--     age (not its content), the newest error, the key, whether a result exists, and the trace id
--     (only the id: a tracestate may carry vendor data);
--   * job_contents (producer, and so worker): the payload, the checkpoint and the result, the same
--     things a producer already reads through job_outcome and writes through INSERT.
--
-- recently_taken (reader): for each job type, when a worker last took one of its jobs, as far as a
-- bounded read can tell: the newest start among its running jobs (jobs_running_idx leads with the
-- type: bounded by the fleet), the newest dead one (jobs_dead_type_idx: one probe), and the
-- newest among the last 1000 jobs finished within the window (jobs_finished_idx). NULL: none of
-- these. `pgwork stats` and `pgwork enqueue` use it to say that a type's jobs may wait for a
-- worker that does not exist. A busy queue finishing over 1000 other jobs in the window can hide
-- a type that only finishes jobs (none running, none dead) from it: a false "not taken", never a
-- missed warning, and only a note is printed.
--
-- Uniqueness. A job enqueued with unique=true is refused (skipped, the existing job's id returned)
-- when its idempotency key already has a unique job that is pending, running or succeeded. The
-- database enforces it with a partial unique index, so two producers racing make one job: the
-- loser's INSERT ... ON CONFLICT DO NOTHING waits for the winner's transaction and then sees its
-- row. A key whose result is in pgwork.job_results counts as succeeded too: results outlive the
-- job rows that retention prunes (or that a history table may later hold), so "succeeded" covers
-- a job whose row is gone. Dead and cancelled jobs do not block a new one: that is how a unique
-- job is tried again from scratch. Jobs enqueued without unique (the default) are never checked
-- and never block a unique one.
--
-- The new column has a constant default (no rewrite) and the index holds only unique jobs, so a
-- queue that never uses uniqueness pays one empty index; the claim's statement is untouched.

ALTER TABLE pgwork.jobs ADD COLUMN is_unique boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX jobs_unique_key_idx ON pgwork.jobs (idempotency_key)
    WHERE is_unique AND status IN ('pending', 'running', 'succeeded');

-- enqueue_unique: the enqueue statement's arrays, plus which jobs are unique; one row per job in
-- input order: its id, whether this call created it, and the status of the job it names. All or
-- none as the plain enqueue (one statement's transaction, or the caller's).
CREATE FUNCTION pgwork.enqueue_unique(
    job_types text[], payloads jsonb[], priorities smallint[], max_attempts smallint[],
    available_ats timestamptz[], delays double precision[], keys text[], trace_contexts jsonb[],
    timeouts double precision[], uniques boolean[], at timestamptz DEFAULT NULL
) RETURNS TABLE (ord integer, id bigint, created boolean, status text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    i integer;
    tries integer;
    new_id bigint;
    old record;
BEGIN
    FOR i IN 1 .. coalesce(array_length(job_types, 1), 0) LOOP
        ord := i;
        tries := 0;
        LOOP
            tries := tries + 1;
            IF coalesce(uniques[i], false) THEN
                SELECT r.job_id AS id, 'succeeded'::text AS status INTO old
                  FROM pgwork.job_results AS r WHERE r.idempotency_key = keys[i];
                IF FOUND THEN
                    id := old.id; created := false; status := old.status;
                    EXIT;
                END IF;
            END IF;
            INSERT INTO pgwork.jobs AS j (job_type, payload, priority, max_attempts, available_at, idempotency_key,
                                          trace_context, timeout_seconds, is_unique)
            VALUES (job_types[i], payloads[i], priorities[i], max_attempts[i],
                    coalesce(available_ats[i], now_ + make_interval(secs => delays[i])), keys[i],
                    trace_contexts[i], timeouts[i], coalesce(uniques[i], false))
            ON CONFLICT (idempotency_key) WHERE is_unique AND status IN ('pending', 'running', 'succeeded')
            DO NOTHING
            RETURNING j.id INTO new_id;
            IF FOUND THEN
                id := new_id; created := true; status := 'pending';
                EXIT;
            END IF;
            -- A new statement, so a new snapshot: it sees the row the conflict waited for.
            SELECT j.id, j.status::text AS status INTO old
              FROM pgwork.jobs AS j
             WHERE j.idempotency_key = keys[i] AND j.is_unique AND j.status IN ('pending', 'running', 'succeeded');
            IF FOUND THEN
                id := old.id; created := false; status := old.status;
                EXIT;
            END IF;
            -- The job that conflicted went dead or was cancelled in between: try again.
            IF tries >= 10 THEN
                RAISE EXCEPTION 'pgwork: key % kept changing state while enqueueing; try again', quote_literal(keys[i])
                    USING ERRCODE = 'serialization_failure';
            END IF;
        END LOOP;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE FUNCTION pgwork.job_detail(job_id bigint, at timestamptz DEFAULT NULL)
RETURNS TABLE (
    id bigint, job_type text, status text, priority smallint, attempt_count smallint, max_attempts smallint,
    created_at timestamptz, available_at timestamptz, started_at timestamptz, completed_at timestamptz,
    lease_owner text, lease_expires_at timestamptz, heartbeat_at timestamptz, cancel_requested_at timestamptz,
    last_error text, idempotency_key text, is_unique boolean, timeout_seconds double precision,
    progress double precision, progress_note text, progress_at timestamptz, checkpoint_at timestamptz,
    has_result boolean, trace_id text, now timestamptz
) LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT j.id, j.job_type, j.status::text, j.priority, j.attempt_count, j.max_attempts,
           j.created_at, j.available_at, j.started_at, j.completed_at,
           j.lease_owner,
           -- The effective lease (version 15): the job's own, or its worker's while that covers it.
           CASE WHEN j.status = 'running' THEN greatest(j.lease_expires_at, w.expires_at) END,
           CASE WHEN j.status = 'running' THEN greatest(j.heartbeat_at, w.heartbeat_at) END,
           j.cancel_requested_at, j.last_error, j.idempotency_key, j.is_unique, j.timeout_seconds,
           j.progress, j.progress_note, j.progress_at, j.checkpoint_at,
           EXISTS (SELECT 1 FROM pgwork.job_results AS r WHERE r.idempotency_key = j.idempotency_key),
           nullif(split_part(j.trace_context ->> 'traceparent', '-', 2), ''),
           coalesce(at, now())
      FROM pgwork.jobs AS j
      LEFT JOIN pgwork.worker_leases AS w
        ON j.status = 'running' AND w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
     WHERE j.id = job_detail.job_id;
$$;

CREATE FUNCTION pgwork.recently_taken(job_types text[], within_seconds double precision, at timestamptz DEFAULT NULL)
RETURNS TABLE (job_type text, taken_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    WITH since AS (
        SELECT coalesce(at, now()) - make_interval(secs => least(greatest(within_seconds, 0), 86400 * 366)) AS t
    ), finished AS (
        SELECT j.job_type, j.completed_at, j.started_at
          FROM pgwork.jobs AS j, since
         WHERE j.status IN ('succeeded', 'cancelled') AND j.completed_at >= since.t
         ORDER BY j.completed_at DESC
         LIMIT 1000
    )
    SELECT t.job_type,
           greatest((SELECT max(j.started_at) FROM pgwork.jobs AS j
                      WHERE j.status = 'running' AND j.job_type = t.job_type),
                    (SELECT max(j.completed_at) FROM pgwork.jobs AS j
                      WHERE j.status = 'dead' AND j.job_type = t.job_type AND j.started_at IS NOT NULL),
                    (SELECT max(f.completed_at) FROM finished AS f
                      WHERE f.job_type = t.job_type AND f.started_at IS NOT NULL))
      FROM (SELECT DISTINCT u.job_type FROM unnest(job_types) AS u(job_type)) AS t;
$$;

CREATE FUNCTION pgwork.job_contents(job_id bigint)
RETURNS TABLE (payload jsonb, checkpoint jsonb, result jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT j.payload, j.checkpoint, r.result
      FROM pgwork.jobs AS j
      LEFT JOIN pgwork.job_results AS r ON r.idempotency_key = j.idempotency_key
     WHERE j.id = job_contents.job_id;
$$;

REVOKE EXECUTE ON FUNCTION pgwork.enqueue_unique(text[], jsonb[], smallint[], smallint[], timestamptz[],
    double precision[], text[], jsonb[], double precision[], boolean[], timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgwork.job_detail(bigint, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgwork.job_contents(bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgwork.recently_taken(text[], double precision, timestamptz) FROM PUBLIC;
SELECT pgwork.add_profile_privilege(
    'reader', 'EXECUTE ON FUNCTION pgwork.recently_taken(text[], double precision, timestamptz)');
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.job_detail(bigint, timestamptz)');
SELECT pgwork.add_profile_privilege('producer', 'EXECUTE ON FUNCTION pgwork.job_contents(bigint)');
SELECT pgwork.add_profile_privilege(
    'producer',
    'EXECUTE ON FUNCTION pgwork.enqueue_unique(text[], jsonb[], smallint[], smallint[], timestamptz[], '
    'double precision[], text[], jsonb[], double precision[], boolean[], timestamptz)');
-- A plain-SQL producer may mark its own INSERT unique (a conflict then raises unique_violation).
SELECT pgwork.add_profile_privilege('producer', 'INSERT (is_unique) ON pgwork.jobs');
