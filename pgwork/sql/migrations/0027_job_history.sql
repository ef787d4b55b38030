-- pgwork schema: finished jobs move to a history partitioned by UTC day, and retention drops whole
-- days (issue 23). Adds the table pgwork.job_history, the view pgwork.all_jobs and the functions
-- pgwork.history_partition, pgwork.history_kept, pgwork.archive_batch and pgwork.drop_history (the
-- last two granted to the reaper profile). job_detail, job_contents and job_status: replace 0016's (and 0022's) so that
-- `pgwork job show`, a producer's contents and `wait` still find a job once it is archived.
--
-- A finish still updates the job's row in pgwork.jobs (nothing on the hot path changes). Later,
-- archive_batch moves succeeded and cancelled jobs completed before a cutoff, a bounded batch per
-- call (the caller commits each): DELETE ... RETURNING from jobs, INSERT into job_history, in one
-- statement, so a job is in exactly one of the two tables at every commit. Dead jobs stay in jobs:
-- people act on them with retry (`pgwork prune --include-dead` deletes them, as before).
--
-- Relatives. job_edges references jobs on both ends ON DELETE CASCADE, and the edges are what a
-- waiting child's parents_left, a child's parent_results and a retried parent's revival read. A
-- finished job is archived only when none of its relatives could still need the edge: every parent
-- and child is succeeded (final), or cancelled and itself completed before the same cutoff (archived
-- by this run too). A relative that is waiting, pending, running, dead, or cancelled recently keeps
-- the job (and its edges) in pgwork.jobs; a later run takes it once the family has finished.
--
-- Retention: drop_history(before) detaches and drops every day partition whose whole day lies
-- before `before`, which may be today (UTC) at the latest, so the partition that today's archiving
-- writes is never dropped. A catalog change and the files' unlinking, no row visited: 0.5-0.6 s for
-- 10 million rows on PostgreSQL 15 here (scripts/history_retention_figures.py).
-- It waits at most 100 ms for each partition's lock (a report reading the history holds it) and
-- reports 'busy' for that one rather than queue every archive and `job show` behind it.

CREATE TABLE pgwork.job_history (LIKE pgwork.jobs) PARTITION BY RANGE (completed_at);
-- `job show ID` finds an archived job by one index probe per day kept.
CREATE INDEX job_history_id_idx ON pgwork.job_history (id);
COMMENT ON TABLE pgwork.job_history IS
    'pgwork: succeeded and cancelled jobs moved out of pgwork.jobs by archive_batch; one partition per UTC day '
    '(job_history_YYYYMMDD) by completed_at, created on demand, dropped whole by drop_history';

-- Every job, live or archived: for reports (the owner's; no profile reads it, as none reads jobs).
-- A migration that adds a column to pgwork.jobs adds it to pgwork.job_history too (one ALTER on the
-- partitioned table reaches every day) and recreates this view.
CREATE VIEW pgwork.all_jobs AS
    SELECT * FROM pgwork.jobs
    UNION ALL
    SELECT * FROM pgwork.job_history;

-- The partition for one UTC day, created if missing; its name. Created standalone and attached
-- (ATTACH takes SHARE UPDATE EXCLUSIVE on job_history, which readers and inserters do not conflict
-- with; CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE). Granted to no one.
CREATE FUNCTION pgwork.history_partition(day date) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
DECLARE
    name_ text := 'job_history_' || to_char(day, 'YYYYMMDD');
BEGIN
    IF to_regclass(format('pgwork.%I', name_)) IS NOT NULL THEN
        RETURN name_;
    END IF;
    -- Two archivers creating the same day: the second waits here, then finds it.
    PERFORM pg_advisory_xact_lock(hashtextextended('pgwork.job_history', 0));
    IF to_regclass(format('pgwork.%I', name_)) IS NULL THEN
        EXECUTE format('CREATE TABLE pgwork.%I (LIKE pgwork.job_history)', name_);
        EXECUTE format(
            'ALTER TABLE pgwork.job_history ATTACH PARTITION pgwork.%I FOR VALUES FROM (%L) TO (%L)',
            name_, (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
    END IF;
    RETURN name_;
END
$$;

-- Whether a finished job must stay in pgwork.jobs for its relatives: a parent or child that is not
-- succeeded, and not cancelled before the cutoff either. Granted to no one. plpgsql, so it is never
-- inlined into archive_batch's scan: a flattened anti-join was planned as a sequential scan of all
-- of jobs per batch (the statistics say almost no job is unfinished); here each edge's relative is
-- one primary-key lookup (OFFSET 0 keeps the subquery per edge).
CREATE FUNCTION pgwork.history_kept(job_id bigint, cutoff timestamptz) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
BEGIN
    RETURN EXISTS (
               SELECT 1 FROM pgwork.job_edges AS e,
                      LATERAL (SELECT r.status, r.completed_at FROM pgwork.jobs AS r WHERE r.id = e.child_id OFFSET 0) AS r
                WHERE e.parent_id = history_kept.job_id
                  AND NOT (r.status = 'succeeded' OR (r.status = 'cancelled' AND r.completed_at < cutoff)))
        OR EXISTS (
               SELECT 1 FROM pgwork.job_edges AS e,
                      LATERAL (SELECT r.status, r.completed_at FROM pgwork.jobs AS r WHERE r.id = e.parent_id OFFSET 0) AS r
                WHERE e.child_id = history_kept.job_id
                  AND NOT (r.status = 'succeeded' OR (r.status = 'cancelled' AND r.completed_at < cutoff)));
END
$$;

CREATE FUNCTION pgwork.archive_batch(older_than_seconds double precision, batch integer,
                                     after timestamptz DEFAULT NULL, at timestamptz DEFAULT NULL)
RETURNS TABLE (moved bigint, through timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    cutoff timestamptz;
    ids bigint[];
    days date[];
    d date;
BEGIN
    IF older_than_seconds IS NULL OR NOT older_than_seconds BETWEEN 0 AND 3153600000 THEN
        RAISE EXCEPTION 'pgwork: older_than_seconds must be 0..3153600000 (a century), not %', older_than_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'pgwork: archive batches hold 1..100000 rows, not %', batch
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    cutoff := now_ - make_interval(secs => older_than_seconds);
    -- Taken now, as the INSERT below would: a drop_history between the partition check and the
    -- INSERT would otherwise leave a row with no partition to go to (drop_history waits 100 ms for
    -- this lock, then reports the day busy).
    LOCK TABLE pgwork.job_history IN ROW EXCLUSIVE MODE;
    -- Oldest first along jobs_finished_idx; rows another session holds (a retry, an enqueue
    -- naming the job as a parent) are skipped, and what is locked here cannot gain an edge.
    SELECT array_agg(c.id), array_agg(DISTINCT (c.completed_at AT TIME ZONE 'UTC')::date)
      INTO ids, days
      FROM (SELECT j.id, j.completed_at FROM pgwork.jobs AS j
             WHERE j.status IN ('succeeded', 'cancelled')
               AND j.completed_at < cutoff
               AND j.completed_at >= coalesce(after, '-infinity'::timestamptz)
               -- Only a job with relatives pays for the look (the flags are set with the edges).
               AND NOT ((j.has_children OR j.parents_left IS NOT NULL) AND pgwork.history_kept(j.id, cutoff))
             ORDER BY j.completed_at
             LIMIT batch
               FOR UPDATE OF j SKIP LOCKED) AS c;
    IF ids IS NULL THEN
        moved := 0; through := NULL;
        RETURN NEXT;
        RETURN;
    END IF;
    FOREACH d IN ARRAY days LOOP
        PERFORM pgwork.history_partition(d);
    END LOOP;
    WITH gone AS (
        DELETE FROM pgwork.jobs AS j WHERE j.id = ANY (ids) RETURNING j.*
    ), kept AS (
        INSERT INTO pgwork.job_history SELECT g.* FROM gone AS g RETURNING job_history.completed_at
    )
    SELECT count(*), max(k.completed_at) INTO moved, through FROM kept AS k;
    RETURN NEXT;
END
$$;

CREATE FUNCTION pgwork.drop_history(before date, at timestamptz DEFAULT NULL)
RETURNS TABLE (partition_name text, day date, rows_estimate bigint, bytes bigint, outcome text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    today date := (now_ AT TIME ZONE 'UTC')::date;
    part record;
    saved_timeout text := current_setting('lock_timeout');
BEGIN
    IF before IS NULL OR before > today THEN
        RAISE EXCEPTION 'pgwork: before must be a day no later than today (UTC, %), not %', today,
            coalesce(before::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR part IN
        SELECT c.relname::text AS name, to_date(substr(c.relname, 13), 'YYYYMMDD') AS d, c.reltuples, c.oid
          FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'pgwork.job_history'::regclass AND c.relname ~ '^job_history_[0-9]{8}$'
         ORDER BY c.relname
    LOOP
        CONTINUE WHEN part.d + 1 > before;
        partition_name := part.name; day := part.d;
        rows_estimate := CASE WHEN part.reltuples < 0 THEN NULL ELSE part.reltuples::bigint END;
        bytes := pg_total_relation_size(part.oid);
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            EXECUTE format('ALTER TABLE pgwork.job_history DETACH PARTITION pgwork.%I', part.name);
            EXECUTE format('DROP TABLE pgwork.%I', part.name);
            outcome := 'dropped';
        EXCEPTION WHEN lock_not_available THEN
            outcome := 'busy';
        END;
        PERFORM set_config('lock_timeout', saved_timeout, true);
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgwork.job_detail(job_id bigint, at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint, job_type text, status text, priority smallint, attempt_count smallint,
               max_attempts smallint, created_at timestamptz, available_at timestamptz,
               started_at timestamptz, completed_at timestamptz, lease_owner text,
               lease_expires_at timestamptz, heartbeat_at timestamptz, cancel_requested_at timestamptz,
               last_error text, idempotency_key text, is_unique boolean, timeout_seconds double precision,
               progress double precision, progress_note text, progress_at timestamptz,
               checkpoint_at timestamptz, has_result boolean, trace_id text, now timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
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
      FROM pgwork.all_jobs AS j
      LEFT JOIN pgwork.worker_leases AS w
        ON j.status = 'running' AND w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
     WHERE j.id = job_detail.job_id
     LIMIT 1;
$$;

CREATE OR REPLACE FUNCTION pgwork.job_contents(job_id bigint)
RETURNS TABLE (payload jsonb, checkpoint jsonb, result jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT j.payload, j.checkpoint, r.result
      FROM pgwork.all_jobs AS j
      LEFT JOIN pgwork.job_results AS r ON r.idempotency_key = j.idempotency_key
     WHERE j.id = job_contents.job_id
     LIMIT 1;
$$;

CREATE OR REPLACE FUNCTION pgwork.job_status(job_id bigint)
RETURNS TABLE (id bigint, status text, attempt_count smallint, last_error text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT j.id, j.status::text, j.attempt_count, j.last_error FROM pgwork.all_jobs AS j
     WHERE j.id = job_status.job_id LIMIT 1;
END
$$;

REVOKE EXECUTE ON FUNCTION pgwork.history_partition(date) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgwork.history_kept(bigint, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgwork.archive_batch(double precision, integer, timestamptz, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgwork.drop_history(date, timestamptz) FROM PUBLIC;
SELECT pgwork.add_profile_privilege(
    'reaper', 'EXECUTE ON FUNCTION pgwork.archive_batch(double precision, integer, timestamptz, timestamptz)');
SELECT pgwork.add_profile_privilege('reaper', 'EXECUTE ON FUNCTION pgwork.drop_history(date, timestamptz)');
