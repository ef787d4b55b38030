-- pgwork schema: a lease renewed per worker, beside the per-claim lease of each job.
--
-- Until this migration every heartbeat rewrote every row its worker held (a HOT update since
-- version 4, still ~113 bytes of WAL a job a round): with 200 jobs running under 16 workers that
-- was most of an idle queue's WAL. Here a worker registers once (pgwork.register_worker, which
-- hands it a secret) and its heartbeat renews one row of pgwork.worker_leases; the jobs that row
-- *covers* live as long as it is renewed, and their own rows are only read.
--
-- A job's attempt is covered once the worker *adopted* it: a heartbeat that presented the job's
-- token together with the matching secret of the job's owner wrote jobs.worker_lease_token =
-- lease_token (one write per attempt, the first renewal after the claim). So
--     covered  <=>  w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
-- and the job's effective expiry is greatest(j.lease_expires_at, w.expires_at) (its effective
-- heartbeat likewise); uncovered, it is its own lease exactly as before. A new claim mints a new
-- token, so no attempt inherits its predecessor's coverage. Every reader of expiry or heartbeat age
-- (the reaper, running_jobs and its view, backlog/queue_stats, `pgwork job show`) uses the
-- effective values.
--
-- Why adoption rather than "claimed after the registration" (j.started_at >= w.registered_at):
-- under that rule a job claimed under the worker's name by another process (two workers started
-- with one --name, or a role with the worker profile that registered the name first) would be kept
-- alive by renewals that are not its holder's. Adoption needs the job's token: only the holder of
-- a claim can put it under a worker lease, and only the holder of that lease's secret renews it.
--
-- What stays exactly as strong as before:
--   * fencing is per claim: the heartbeat answers for each (job id, token) whether the token still
--     holds the job; succeed, fail, release and checkpoint check the token as they always did.
--     The secret only decides whether a row needs writing, never who may finish a job;
--   * a worker registering an owner name again (a restarted pod keeps its name; or another role
--     using someone else's) gets a new secret. Before the row is taken over, every job it covers is
--     uncovered and the lease it had earned written into its own row (pgwork.settle_worker_lease),
--     so a takeover never shortens a lease nor keeps the old process's jobs alive: they keep what
--     they had, then live only if the holder of their tokens renews them (the heartbeat renews
--     uncovered jobs row by row, so a worker whose registration was taken over loses nothing and
--     registers again), or are reaped;
--   * a covered job the worker no longer passes (one it gave up when the database was unreachable)
--     would otherwise live as long as the worker does: each heartbeat uncovers, the same way, the
--     covered jobs of its owner that it did not pass.
-- Rows whose progress changed (it rides on the heartbeat since version 12) and uncovered rows are
-- renewed per row as before, so a caller that passes no worker (an older pgwork) keeps working.
--
-- The reaper still reads only the jobs in flight (jobs_running_idx) and looks each one's worker
-- up by primary key: its cost follows the fleet, not history. It also deletes worker rows expired
-- for over an hour that no running job names, so pod churn does not grow the table. The new
-- column is in no index, so adoption and every renewal stay HOT.

-- No default: adding the column rewrites nothing; every row starts uncovered.
ALTER TABLE pgwork.jobs ADD COLUMN worker_lease_token uuid;

CREATE TABLE pgwork.worker_leases (
    owner         text        PRIMARY KEY,
    secret        uuid        NOT NULL,
    registered_at timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL
);
-- Only the schema owner reads it (through the functions below): the secret is the worker's.
REVOKE ALL ON pgwork.worker_leases FROM PUBLIC;

-- settle_worker_lease: uncover the jobs a registration covers, writing the lease it had earned
-- into their own rows first (a takeover of the name; a job the worker stopped passing). No profile
-- may call it (it writes leases without a token); SECURITY DEFINER like every function that writes
-- jobs. `keep`: ids left covered (the jobs a heartbeat passed); NULL: none.
CREATE FUNCTION pgwork.settle_worker_lease(
    worker text, earned timestamptz, beat timestamptz, keep bigint[]
) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    UPDATE pgwork.jobs AS j
       SET worker_lease_token = NULL,
           lease_expires_at = greatest(j.lease_expires_at, earned),
           heartbeat_at = greatest(j.heartbeat_at, beat)
     WHERE j.status = 'running' AND j.lease_owner = worker AND j.worker_lease_token = j.lease_token
       AND j.id <> ALL (coalesce(keep, ARRAY[]::bigint[]));
$$;

-- register_worker: the worker's secret for `owner`, inserted or taken over (new secret, new
-- registered_at) when the name is registered already. Called once at the worker's start and again
-- whenever its heartbeat says the registration is no longer its own.
CREATE FUNCTION pgwork.register_worker(owner text, lease_seconds double precision, at timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    fresh uuid := gen_random_uuid();
    old pgwork.worker_leases;
BEGIN
    IF register_worker.owner IS NULL OR register_worker.owner = '' THEN
        RAISE EXCEPTION 'pgwork: a worker registers under a non-empty owner name'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (lease_seconds > 0 AND lease_seconds < 'infinity') THEN
        RAISE EXCEPTION 'pgwork: lease_seconds must be a positive number of seconds, not %', lease_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOOP
        SELECT w.* INTO old FROM pgwork.worker_leases AS w WHERE w.owner = register_worker.owner FOR UPDATE;
        IF FOUND THEN
            PERFORM pgwork.settle_worker_lease(old.owner, old.expires_at, old.heartbeat_at, NULL);
            UPDATE pgwork.worker_leases AS w
               SET secret = fresh, registered_at = now_, heartbeat_at = now_,
                   expires_at = now_ + make_interval(secs => lease_seconds)
             WHERE w.owner = register_worker.owner;
            RETURN fresh;
        END IF;
        INSERT INTO pgwork.worker_leases AS w (owner, secret, registered_at, heartbeat_at, expires_at)
        VALUES (register_worker.owner, fresh, now_, now_, now_ + make_interval(secs => lease_seconds))
        ON CONFLICT ON CONSTRAINT worker_leases_pkey DO NOTHING;
        IF FOUND THEN
            RETURN fresh;
        END IF;
        -- Another registration of the name committed between the two statements: take it over.
    END LOOP;
END
$$;
SELECT pgwork.add_profile_privilege(
    'worker', 'EXECUTE ON FUNCTION pgwork.register_worker(text, double precision, timestamptz)');

-- heartbeat: version 12's, plus the worker's (owner, secret). When the secret matches, the
-- worker's row is renewed; the jobs it covers are answered from a read (no row written), except
-- those whose progress changed; the other jobs of that owner passed with their tokens are renewed
-- per row and adopted (covered from the next round on); the covered jobs not passed are uncovered.
-- Every other lease passed is renewed per row exactly as in version 12. With a worker given, one
-- more row comes back, with id NULL: lease_expires_at is the worker lease's new expiry, or NULL
-- when the secret did not match (register again). The job rows' lease_expires_at is the effective
-- expiry. Same result columns as version 12, so a call with version 12's six arguments is
-- answered as before.
SELECT pgwork.drop_profile_privilege(
    'worker',
    'EXECUTE ON FUNCTION pgwork.heartbeat(bigint[], uuid[], double precision, double precision[], text[], timestamptz)');
DROP FUNCTION pgwork.heartbeat(bigint[], uuid[], double precision, double precision[], text[], timestamptz);
CREATE FUNCTION pgwork.heartbeat(
    job_ids bigint[], tokens uuid[], lease_seconds double precision, progress double precision[] DEFAULT NULL,
    notes text[] DEFAULT NULL, at timestamptz DEFAULT NULL, worker text DEFAULT NULL, secret uuid DEFAULT NULL
) RETURNS TABLE (id bigint, cancel_requested boolean, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    until_ timestamptz := now_ + make_interval(secs => lease_seconds);
    mine text;  -- the owner whose worker lease this call renews; NULL: none (no worker, or a wrong secret)
    earned timestamptz;
    beat timestamptz;
BEGIN
    IF heartbeat.worker IS NOT NULL AND heartbeat.secret IS NOT NULL THEN
        SELECT w.owner, w.expires_at, w.heartbeat_at INTO mine, earned, beat
          FROM pgwork.worker_leases AS w
         WHERE w.owner = heartbeat.worker AND w.secret = heartbeat.secret
           FOR UPDATE;
        IF mine IS NOT NULL THEN
            -- Covered jobs the worker no longer passes are not its to keep alive.
            PERFORM pgwork.settle_worker_lease(mine, earned, beat, job_ids);
            UPDATE pgwork.worker_leases AS w SET heartbeat_at = now_, expires_at = until_ WHERE w.owner = mine;
        END IF;
        RETURN QUERY SELECT NULL::bigint, false, CASE WHEN mine IS NULL THEN NULL ELSE until_ END;
    END IF;
    -- Covered and no new progress: the worker's row renewed them; answer from the job rows.
    RETURN QUERY
    SELECT j.id, j.cancel_requested_at IS NOT NULL, greatest(j.lease_expires_at, until_)
      FROM unnest(job_ids, tokens, heartbeat.progress) AS u(id, token, fraction)
      JOIN pgwork.jobs AS j ON j.id = u.id AND j.lease_token = u.token AND j.status = 'running'
     WHERE j.lease_owner = mine AND j.worker_lease_token = j.lease_token
       AND NOT coalesce(u.fraction >= 0 AND u.fraction <= 1, false);
    -- Everything else: renewed per row, as version 12 did, and adopted when the worker lease is ours.
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET heartbeat_at = now_,
           lease_expires_at = until_,
           worker_lease_token = CASE WHEN j.lease_owner = mine THEN j.lease_token ELSE j.worker_lease_token END,
           progress = coalesce(l.fraction, j.progress),
           progress_note = CASE WHEN l.fraction IS NULL THEN j.progress_note ELSE l.note END,
           progress_at = CASE WHEN l.fraction IS NULL
                                OR (l.fraction = j.progress AND l.note IS NOT DISTINCT FROM j.progress_note)
                              THEN j.progress_at ELSE now_ END
      FROM (SELECT u.id, u.token,
                   CASE WHEN u.fraction >= 0 AND u.fraction <= 1 THEN u.fraction END AS fraction,
                   left(u.note, 200) AS note
              FROM unnest(job_ids, tokens, heartbeat.progress, notes) AS u(id, token, fraction, note)
             WHERE u.id IS NOT NULL) AS l
     WHERE j.id = l.id AND j.lease_token = l.token AND j.status = 'running'
       AND (mine IS NULL OR j.lease_owner IS DISTINCT FROM mine
            OR j.worker_lease_token IS DISTINCT FROM j.lease_token OR l.fraction IS NOT NULL)
    RETURNING j.id, j.cancel_requested_at IS NOT NULL, j.lease_expires_at;
END
$$;
SELECT pgwork.add_profile_privilege(
    'worker',
    'EXECUTE ON FUNCTION pgwork.heartbeat(bigint[], uuid[], double precision, double precision[], text[], '
    'timestamptz, text, uuid)');

-- reap: version 2's, on the effective expiry. The candidates are the jobs in flight
-- (jobs_running_idx), each joined to its worker's row by primary key; the UPDATE re-checks status
-- and both expiries under the row lock, so a job renewed a moment earlier (its row, or its
-- worker's) is left alone. Then worker rows long expired that no running job names are deleted.
CREATE OR REPLACE FUNCTION pgwork.reap(max_jobs integer, at timestamptz DEFAULT NULL)
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
        -- OFFSET 0 keeps the lookup a per-row probe of worker_leases_pkey: a join the planner
        -- flattened could hash the whole table instead.
        SELECT r.id, greatest(r.lease_expires_at, w.expires_at) AS expired_at
          FROM pgwork.jobs AS r
          LEFT JOIN LATERAL (SELECT v.expires_at FROM pgwork.worker_leases AS v
                              WHERE v.owner = r.lease_owner AND r.worker_lease_token = r.lease_token
                             OFFSET 0) AS w ON true
         WHERE r.status = 'running' AND r.lease_expires_at < now_ AND (w.expires_at IS NULL OR w.expires_at < now_)
         ORDER BY 2
         LIMIT max_jobs
           FOR UPDATE OF r SKIP LOCKED
    ), before AS (
        SELECT b.id, b.lease_owner, e.expired_at FROM pgwork.jobs AS b JOIN expired AS e ON e.id = b.id
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
       AND coalesce((SELECT v.expires_at FROM pgwork.worker_leases AS v
                      WHERE v.owner = j.lease_owner AND j.worker_lease_token = j.lease_token), '-infinity') < now_
    RETURNING j.id, j.job_type, b.lease_owner, j.attempt_count, j.status::text,
              extract(epoch FROM now_ - b.expired_at)::double precision;

    -- A scan of worker_leases, whose size this very statement bounds (live workers, and pods
    -- gone for less than an hour): never of the jobs' history.
    DELETE FROM pgwork.worker_leases AS w
     WHERE w.owner IN (SELECT x.owner FROM pgwork.worker_leases AS x
                        WHERE x.expires_at < now_ - interval '1 hour'
                          AND NOT EXISTS (SELECT 1 FROM pgwork.jobs AS j
                                           WHERE j.status = 'running' AND j.lease_owner = x.owner)
                        LIMIT max_jobs
                          FOR UPDATE SKIP LOCKED);
END
$$;

-- running_jobs (the pgwork.running view, `pgwork running`): version 12's columns, the lease's
-- remaining time and the heartbeat's age now the effective ones. Same signature and columns, so
-- it is replaced in place and the view and its grants stay.
CREATE OR REPLACE FUNCTION pgwork.running_jobs(at timestamptz DEFAULT now())
RETURNS TABLE (
    id bigint, job_type text, lease_owner text, attempt_count smallint, max_attempts smallint,
    started_at timestamptz, lease_remaining_seconds double precision,
    since_heartbeat_seconds double precision, cancel_requested boolean,
    progress double precision, progress_note text, since_progress_seconds double precision,
    since_checkpoint_seconds double precision
) LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT j.id, j.job_type, j.lease_owner, j.attempt_count, j.max_attempts, j.started_at,
           extract(epoch FROM greatest(j.lease_expires_at, w.expires_at) - at)::double precision,
           extract(epoch FROM at - greatest(j.heartbeat_at, w.heartbeat_at))::double precision,
           j.cancel_requested_at IS NOT NULL,
           j.progress, j.progress_note,
           extract(epoch FROM at - j.progress_at)::double precision,
           extract(epoch FROM at - j.checkpoint_at)::double precision
      FROM pgwork.jobs AS j
      LEFT JOIN pgwork.worker_leases AS w ON w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
     WHERE j.status = 'running'
     ORDER BY greatest(j.lease_expires_at, w.expires_at)
$$;

-- backlog (and queue_stats, which reads it): version 7's, the oldest heartbeat the effective one.
CREATE OR REPLACE FUNCTION pgwork.backlog(job_types text[] DEFAULT NULL, cap integer DEFAULT NULL, at timestamptz DEFAULT now())
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
    ), beats(t, beat) AS (
        SELECT j.job_type, greatest(j.heartbeat_at, w.heartbeat_at)
          FROM pgwork.jobs AS j
          LEFT JOIN pgwork.worker_leases AS w ON w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
         WHERE j.status = 'running' AND (job_types IS NULL OR j.job_type = ANY (job_types))
    ), in_flight(t, n, oldest) AS (
        SELECT b.t, count(*), min(b.beat) FILTER (WHERE b.beat > '-infinity' AND b.beat < 'infinity')
          FROM beats AS b
         GROUP BY b.t
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

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
