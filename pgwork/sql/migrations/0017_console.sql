-- pgwork schema, version 17: what the operator's console (`pgwork ui`) reads and records.
-- A job's own page reads version 16's job_detail and job_contents, as `pgwork job show` does.
-- Replaces nothing: adds a table, a type and eight functions.
--
-- find_jobs / find_jobs_contents. The console lists jobs filtered by type, state, error text, time
-- and (for roles that may read payloads) a payload path and value. No profile reads pgwork.jobs,
-- so the search is a SECURITY DEFINER function; neither version returns payloads or results (a
-- job's page reads them through version 16's job_contents); the reader's takes no payload filter
-- (a filter would let a reader probe payloads one guess at a time), the producer's (and so the
-- worker's) does. Both call one internal function no profile
-- may call. Its cost is bounded whatever the filter: it looks at most `scan` jobs, newest first
-- from the cursor `before_id` (jobs_pkey read backwards), and returns the matches among them
-- (at most `lim`); job_window says where that window ended, so the console can offer "search
-- older" instead of a scan of the whole history. Keyset, never OFFSET: each page starts below
-- the last id shown. `pgwork.jobs` is read only here, so a later table layout (a history table)
-- changes these functions, not the console.
--
-- finished_buckets: jobs finished (succeeded or cancelled) and dead per time bucket, for the
-- console's charts, each count capped (jobs_finished_idx, jobs_dead_idx: a range each).
--
-- console_actions: who retried or cancelled what through the console, and when. Written by
-- record_console_action (maintainer, in the action's own transaction), read by console_actions_recent
-- (reader). The database role is recorded by the function (session_user), the console's user
-- (basic auth, or a trusted proxy header) as the console passes it.

CREATE TABLE pgwork.console_actions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    db_role     text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('retry', 'cancel')),
    target      text        NOT NULL CHECK (length(target) <= 2000),  -- "job 42" or the filter, as text
    jobs        integer     NOT NULL CHECK (jobs >= 0),
    outcome     text        NOT NULL CHECK (length(outcome) <= 2000)
);
REVOKE ALL ON pgwork.console_actions FROM PUBLIC;

-- One job as the console's list shows it: its life, never its payload or result (a job's page
-- reads those through job_contents, version 16).
CREATE TYPE pgwork.found_job AS (
    id bigint, job_type text, status text, priority smallint, attempt_count smallint, max_attempts smallint,
    created_at timestamptz, available_at timestamptz, started_at timestamptz, completed_at timestamptz,
    lease_owner text, lease_expires_at timestamptz, heartbeat_at timestamptz, cancel_requested_at timestamptz,
    last_error text, error_length integer, idempotency_key text, timeout_seconds double precision,
    progress double precision, progress_note text, progress_at timestamptz, checkpoint_at timestamptz,
    trace_id text, now timestamptz
);

CREATE FUNCTION pgwork.find_jobs_scan(
    job_types text[], statuses text[], error_text text, created_from timestamptz, created_to timestamptz,
    payload_path text[], payload_value text, before_id bigint, scan integer, lim integer,
    error_chars integer, contents boolean, at timestamptz
) RETURNS SETOF pgwork.found_job LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    WITH window_ AS (
        -- The newest `scan` jobs below the cursor: the bound on what one page costs.
        -- One range condition, so jobs_pkey always answers it (an OR of "no cursor" would not).
        SELECT j.* FROM pgwork.jobs AS j
         WHERE j.id < coalesce(before_id, 9223372036854775807)
         ORDER BY j.id DESC
         LIMIT least(greatest(scan, 1), 1000000)
    )
    SELECT j.id, j.job_type, j.status::text, j.priority, j.attempt_count, j.max_attempts,
           j.created_at, j.available_at, j.started_at, j.completed_at, j.lease_owner,
           -- The effective lease and heartbeat (version 15): the job's own, or its worker's.
           CASE WHEN j.status = 'running' THEN greatest(j.lease_expires_at, w.expires_at) END,
           CASE WHEN j.status = 'running' THEN greatest(j.heartbeat_at, w.heartbeat_at) END,
           j.cancel_requested_at,
           CASE WHEN error_chars IS NULL THEN j.last_error ELSE left(j.last_error, error_chars) END,
           length(j.last_error), j.idempotency_key, j.timeout_seconds,
           j.progress, j.progress_note, j.progress_at, j.checkpoint_at,
           -- Only the trace id: a tracestate may carry vendor data.
           nullif(split_part(j.trace_context ->> 'traceparent', '-', 2), ''),
           at
      FROM window_ AS j
      LEFT JOIN pgwork.worker_leases AS w ON w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
     WHERE (job_types IS NULL OR j.job_type = ANY (job_types))
       AND (statuses IS NULL OR j.status::text = ANY (statuses))
       AND (error_text IS NULL OR strpos(lower(j.last_error), lower(error_text)) > 0)
       AND (created_from IS NULL OR j.created_at >= created_from)
       AND (created_to IS NULL OR j.created_at < created_to)
       AND (payload_path IS NULL OR (contents AND j.payload #>> payload_path = payload_value))
     ORDER BY j.id DESC
     LIMIT least(greatest(lim, 1), 10000)
$$;
REVOKE EXECUTE ON FUNCTION pgwork.find_jobs_scan(text[], text[], text, timestamptz, timestamptz, text[], text,
    bigint, integer, integer, integer, boolean, timestamptz) FROM PUBLIC;

CREATE FUNCTION pgwork.find_jobs(
    job_types text[], statuses text[], error_text text, created_from timestamptz, created_to timestamptz,
    before_id bigint, scan integer, lim integer, error_chars integer, at timestamptz DEFAULT now()
) RETURNS SETOF pgwork.found_job LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT * FROM pgwork.find_jobs_scan(job_types, statuses, error_text, created_from, created_to, NULL, NULL,
                                        before_id, scan, lim, error_chars, false, at)
$$;

CREATE FUNCTION pgwork.find_jobs_contents(
    job_types text[], statuses text[], error_text text, created_from timestamptz, created_to timestamptz,
    payload_path text[], payload_value text, before_id bigint, scan integer, lim integer,
    error_chars integer, at timestamptz DEFAULT now()
) RETURNS SETOF pgwork.found_job LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT * FROM pgwork.find_jobs_scan(job_types, statuses, error_text, created_from, created_to, payload_path,
                                        payload_value, before_id, scan, lim, error_chars, true, at)
$$;

-- Where a window of `scan` jobs below `before_id` ends: the cursor for "search older"; NULL when
-- the window held fewer than `scan` jobs (no older job). An index-only walk of jobs_pkey.
CREATE FUNCTION pgwork.job_window(before_id bigint, scan integer) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT CASE WHEN count(*) >= least(greatest(scan, 1), 1000000) THEN min(w.id) END FROM (SELECT j.id FROM pgwork.jobs AS j WHERE before_id IS NULL OR j.id < before_id
                            ORDER BY j.id DESC LIMIT least(greatest(scan, 1), 1000000)) AS w
$$;

-- Jobs finished and dead per bucket of `bucket_seconds`, the newest `buckets` ending at `at`, each
-- count stopping at `cap` (a capped count reads as "at least"): one bounded range of
-- jobs_finished_idx and of jobs_dead_idx per bucket.
CREATE FUNCTION pgwork.finished_buckets(buckets integer, bucket_seconds double precision, cap integer,
                                        at timestamptz DEFAULT now())
RETURNS TABLE (bucket_start timestamptz, finished bigint, dead bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT b.s,
           (SELECT count(*) FROM (SELECT 1 FROM pgwork.jobs AS j
                                   WHERE j.status IN ('succeeded', 'cancelled')
                                     AND j.completed_at >= b.s AND j.completed_at < b.e LIMIT cap) AS n),
           (SELECT count(*) FROM (SELECT 1 FROM pgwork.jobs AS j
                                   WHERE j.status = 'dead' AND j.completed_at >= b.s AND j.completed_at < b.e
                                   LIMIT cap) AS n)
      FROM (SELECT at - make_interval(secs => bucket_seconds * g) AS s,
                   at - make_interval(secs => bucket_seconds * (g - 1)) AS e
              FROM generate_series(least(greatest(buckets, 1), 200), 1, -1) AS g) AS b
     ORDER BY b.s
$$;

-- The newest dead jobs, newest death first, each error cut to `error_chars`: a backward walk of
-- jobs_dead_idx that stops after `lim` rows. (pgwork.dead_jobs orders by (completed_at, id), which
-- no index holds, so it sorts every dead job first: fine for `pgwork dead`, not for a page.)
CREATE FUNCTION pgwork.dead_letters(lim integer, error_chars integer)
RETURNS TABLE (id bigint, job_type text, attempt_count smallint, max_attempts smallint, completed_at timestamptz,
               last_error text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT j.id, j.job_type, j.attempt_count, j.max_attempts, j.completed_at, left(j.last_error, error_chars)
      FROM pgwork.jobs AS j
     WHERE j.status = 'dead'
     ORDER BY j.completed_at DESC
     LIMIT least(greatest(lim, 1), 1000)
$$;

CREATE FUNCTION pgwork.record_console_action(actor text, action text, target text, jobs integer, outcome text)
RETURNS bigint LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    INSERT INTO pgwork.console_actions (actor, db_role, action, target, jobs, outcome)
    VALUES (left(actor, 200), session_user, action, left(target, 2000), jobs, left(outcome, 2000))
    RETURNING id
$$;

CREATE FUNCTION pgwork.console_actions_recent(lim integer)
RETURNS TABLE (id bigint, at timestamptz, actor text, db_role text, action text, target text, jobs integer,
               outcome text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT a.id, a.at, a.actor, a.db_role, a.action, a.target, a.jobs, a.outcome
      FROM pgwork.console_actions AS a ORDER BY a.id DESC LIMIT least(greatest(lim, 1), 1000)
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.find_jobs(text[], text[], text, '
    'timestamptz, timestamptz, bigint, integer, integer, integer, timestamptz)');
SELECT pgwork.add_profile_privilege('producer', 'EXECUTE ON FUNCTION pgwork.find_jobs_contents(text[], text[], '
    'text, timestamptz, timestamptz, text[], text, bigint, integer, integer, integer, timestamptz)');
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.job_window(bigint, integer)');
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.finished_buckets(integer, '
    'double precision, integer, timestamptz)');
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.console_actions_recent(integer)');
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.dead_letters(integer, integer)');
SELECT pgwork.add_profile_privilege('maintainer', 'EXECUTE ON FUNCTION pgwork.record_console_action(text, '
    'text, text, integer, text)');
