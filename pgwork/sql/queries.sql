-- Every statement pgwork sends, by name and row shape (:one at most one row, :many rows,
-- :scalar one value, :exec nothing, :copy a COPY FROM STDIN), run by pgwork.db.statements; pgwork.db is the only caller.
-- Parameters are psycopg named placeholders. Time-dependent statements take %(now)s,
-- which is NULL in production (the server's clock) and a fixed instant in tests.

-- name: server_encoding :scalar
SHOW server_encoding;

-- name: schema_version :scalar
SELECT coalesce(max(version), 0) AS version FROM pgwork.schema_version;

-- name: schema_exists :scalar
SELECT to_regclass('pgwork.schema_version') IS NOT NULL AS present;

-- name: migrate_try_lock :scalar
-- Concurrent migrators run one after another. The lock is a transaction's, held by a connection of
-- its own while another applies the migrations (some outside any transaction), so it works through
-- a transaction-mode pooler (the open transaction keeps its server connection). Taken by polling:
-- between polls a waiter holds no snapshot, and after it the holder's transaction holds none either
-- (READ COMMITTED, no xid), so neither stalls a CREATE INDEX CONCURRENTLY, which waits for every
-- older snapshot (a waiter blocked inside pg_advisory_xact_lock holds one: the two would deadlock).
-- The key is the one pgwork took before version 24, so old and new migrators exclude each other.
SELECT pg_try_advisory_xact_lock(hashtext('pgwork.migrate')) AS locked;

-- name: migrate_lock_holder :one
-- Who holds the migration lock, for the message of a migrator that gave up waiting.
SELECT a.pid, a.application_name, round(extract(epoch FROM now() - coalesce(a.xact_start, a.backend_start)))::bigint AS held_s
  FROM pg_catalog.pg_locks AS l
  JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_catalog.pg_database
                                                                WHERE datname = current_database())
   AND l.objid = (hashtext('pgwork.migrate')::bigint & 4294967295)::oid
 LIMIT 1;

-- name: index_valid :scalar
-- NULL: no such index; false: a CREATE/DROP INDEX CONCURRENTLY was interrupted and left it invalid.
SELECT i.indisvalid AS valid
  FROM pg_catalog.pg_index AS i
  JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid
  JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
 WHERE n.nspname = %(schema)s AND c.relname = %(index)s;

-- name: migrate_bootstrap :exec
CREATE SCHEMA IF NOT EXISTS pgwork;
CREATE TABLE IF NOT EXISTS pgwork.schema_version (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: role_facts :one
-- What `pgwork grant` checks about a grantee before touching its privileges.
SELECT r.rolname, r.rolsuper,
       pg_catalog.pg_has_role(r.oid, n.nspowner, 'MEMBER') AS has_owner_rights
  FROM pg_catalog.pg_roles AS r, pg_catalog.pg_namespace AS n
 WHERE r.rolname = %(role)s AND n.nspname = 'pgwork';

-- name: grant_profiles :scalar
SELECT pgwork.grant_profiles(%(role)s::text, %(profiles)s::text[]) AS applied;

-- name: migrate_record :exec
INSERT INTO pgwork.schema_version (version, name) VALUES (%(version)s, %(name)s);

-- name: enqueue :many
INSERT INTO pgwork.jobs (job_type, payload, priority, max_attempts, available_at, idempotency_key, trace_context,
                         timeout_seconds)
SELECT t.job_type, t.payload, t.priority, t.max_attempts,
       coalesce(t.available_at, coalesce(%(now)s::timestamptz, now()) + make_interval(secs => t.delay)),
       t.idempotency_key, t.trace_context, t.timeout_seconds
  FROM unnest(%(job_types)s::text[], %(payloads)s::jsonb[], %(priorities)s::smallint[],
              %(max_attempts)s::smallint[], %(available_ats)s::timestamptz[], %(delays)s::float8[],
              %(keys)s::text[], %(trace_contexts)s::jsonb[], %(timeouts)s::float8[])
       WITH ORDINALITY AS t(job_type, payload, priority, max_attempts, available_at, delay,
                            idempotency_key, trace_context, timeout_seconds, ord)
 ORDER BY t.ord
RETURNING id;

-- name: enqueue_unique :many
-- The enqueue for a batch holding unique jobs (migration 16): one row per job in input order, the
-- existing job's id where a unique job's key was taken.
SELECT * FROM pgwork.enqueue_unique(%(job_types)s::text[], %(payloads)s::jsonb[], %(priorities)s::smallint[],
                                    %(max_attempts)s::smallint[], %(available_ats)s::timestamptz[],
                                    %(delays)s::float8[], %(keys)s::text[], %(trace_contexts)s::jsonb[],
                                    %(timeouts)s::float8[], %(uniques)s::boolean[], %(now)s::timestamptz)
 ORDER BY ord;

-- name: enqueue_after :many
-- Jobs that wait for parents (migration 22): one row per job in input order, with its status
-- (waiting, or pending when every parent had already succeeded).
SELECT * FROM pgwork.enqueue_after(%(job_types)s::text[], %(payloads)s::jsonb[], %(priorities)s::smallint[],
                                   %(max_attempts)s::smallint[], %(available_ats)s::timestamptz[],
                                   %(delays)s::float8[], %(keys)s::text[], %(trace_contexts)s::jsonb[],
                                   %(timeouts)s::float8[], %(after_ords)s::integer[], %(after_ids)s::bigint[],
                                   %(after_keys)s::text[], %(runs)s::boolean[], %(now)s::timestamptz)
 ORDER BY ord;

-- name: parent_results :many
-- A child's parents with their results (migration 22; producers and workers).
SELECT * FROM pgwork.parent_results(%(id)s::bigint);

-- name: job_family :many
-- A job's parents and children, the first %(limit)s of each, for any reader (migration 22).
SELECT * FROM pgwork.job_family(%(id)s::bigint, %(limit)s::integer);

-- name: waiting_counts :many
SELECT * FROM pgwork.waiting_counts(%(cap)s::integer);

-- The job's life goes through the functions of migration 0002 (SECURITY DEFINER, fenced by the
-- lease token): one path whatever role calls, and the only way in for the roles `pgwork grant`
-- sets up. Arguments are cast to the functions' exact types (psycopg sends Python ints as the
-- smallest integer type that fits).

-- name: claim :many
SELECT * FROM pgwork.claim(%(owner)s::text, %(job_types)s::text[], %(limit)s::integer, %(lease)s::float8,
                           %(now)s::timestamptz);

-- name: heartbeat :many
-- progress[i] and notes[i] go with ids[i]: NULL where a job reported no new progress (migration 0012).
-- With a worker and its secret (the worker lease), the jobs that registration covers are renewed
-- by one row and a row with id NULL says whether it still holds (lease_expires_at NULL: it does not).
SELECT * FROM pgwork.heartbeat(%(ids)s::bigint[], %(tokens)s::uuid[], %(lease)s::float8, %(progress)s::float8[],
                               %(notes)s::text[], %(now)s::timestamptz, %(worker)s::text, %(secret)s::uuid);

-- name: register_worker :scalar
-- The worker lease's secret for this owner, a new one each time (a takeover of the name included).
SELECT pgwork.register_worker(%(owner)s::text, %(lease)s::float8, %(now)s::timestamptz) AS secret;

-- name: checkpoint :one
SELECT * FROM pgwork.checkpoint(%(id)s::bigint, %(token)s::uuid, %(state)s::jsonb, %(now)s::timestamptz);

-- name: succeed :one
SELECT * FROM pgwork.succeed(%(id)s::bigint, %(token)s::uuid, %(result)s::jsonb, %(now)s::timestamptz);

-- name: succeed_many :many
-- The arrays go in binary: as text each element is quoted and escaped through a regular
-- expression, about 4.5 us a job of a batch's write in Python (issue 29).
SELECT * FROM pgwork.succeed_many(%(ids)b::bigint[], %(tokens)b::uuid[], %(results)b::jsonb[],
                                  %(now)s::timestamptz);

-- name: succeed_many_inline :many
-- succeed_many with its arguments bound into the text: pgwork.db.roundtrip sends it with the next
-- claim in one simple-query message, which carries no arguments of its own (issue 28).
SELECT * FROM pgwork.succeed_many(%(ids)s::bigint[], %(tokens)s::uuid[], %(results)s::jsonb[],
                                  %(now)s::timestamptz);

-- name: succeed_followups :many
-- succeed_many, and the follow-up jobs of what it marked succeeded, in one transaction (migration 22).
SELECT * FROM pgwork.succeed_with_followups(
    %(ids)s::bigint[], %(tokens)s::uuid[], %(results)s::jsonb[],
    %(f_parents)s::bigint[], %(f_job_types)s::text[], %(f_payloads)s::jsonb[], %(f_priorities)s::smallint[],
    %(f_max_attempts)s::smallint[], %(f_available_ats)s::timestamptz[], %(f_delays)s::float8[],
    %(f_keys)s::text[], %(f_trace_contexts)s::jsonb[], %(f_timeouts)s::float8[],
    %(after_ords)s::integer[], %(after_ids)s::bigint[], %(after_keys)s::text[], %(f_runs)s::boolean[],
    %(now)s::timestamptz);

-- name: set_state_if_held :one
-- A failed attempt's decided state (pgwork.failure.decide_failure), applied only while the token
-- holds the job, within the bounds the function itself enforces (migration 0003).
SELECT * FROM pgwork.set_state_if_held(%(id)s::bigint, %(token)s::uuid, %(state)s::text, %(reason)s::text,
                                       %(retry_delay)s::float8, %(error)s::text, %(now)s::timestamptz);

-- name: release :one
SELECT * FROM pgwork.release(%(id)s::bigint, %(token)s::uuid, %(note)s::text, %(now)s::timestamptz);

-- name: acknowledge_cancel :one
SELECT * FROM pgwork.acknowledge_cancel(%(id)s::bigint, %(token)s::uuid, %(note)s::text, %(now)s::timestamptz);

-- name: reap :many
SELECT * FROM pgwork.reap(%(limit)s::integer, %(now)s::timestamptz);

-- name: rotate_ready :many
-- Truncate the ready ring's drained segments (migration 23): workers and the reaper call it.
SELECT * FROM pgwork.rotate_ready(%(now)s::timestamptz, %(move_limit)s::integer);

-- name: retry :many
SELECT * FROM pgwork.retry(%(ids)s::bigint[], %(max_attempts)s::smallint, %(now)s::timestamptz);

-- name: cancel :many
SELECT * FROM pgwork.cancel(%(ids)s::bigint[], %(now)s::timestamptz);

-- name: prune :scalar
SELECT pgwork.prune(%(statuses)s::text[], %(older_than)s::float8, %(batch)s::integer, %(now)s::timestamptz)
       AS deleted;

-- name: claim_source :scalar
-- The body of the installed claim function, for the plan tests and the lab (claim_statement).
SELECT p.prosrc FROM pg_catalog.pg_proc AS p
 WHERE p.oid = 'pgwork.claim(text, text[], integer, double precision, timestamptz)'::regprocedure;

-- name: get_job :one
-- Live or archived (pgwork.all_jobs, migration 0027): a job is in exactly one of the two.
SELECT j.id, j.job_type, j.payload, j.status::text AS status, j.priority, j.attempt_count,
       j.max_attempts, j.created_at, j.available_at, j.started_at, j.completed_at,
       j.lease_owner, j.lease_token,
       -- The effective lease: the job's own, or its worker's while that registration covers it.
       greatest(j.lease_expires_at, w.expires_at) AS lease_expires_at,
       greatest(j.heartbeat_at, w.heartbeat_at) AS heartbeat_at, j.cancel_requested_at,
       j.last_error, j.idempotency_key, j.trace_context, j.timeout_seconds,
       j.progress, j.progress_note, j.progress_at, j.checkpoint, j.checkpoint_at
  FROM pgwork.all_jobs AS j
  LEFT JOIN pgwork.worker_leases AS w
    ON j.status = 'running' AND w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
 WHERE j.id = %(id)s;

-- name: job_detail :one
-- `pgwork job show`: one job's life without its contents, for any reader (migration 16).
SELECT d.*, has_function_privilege('pgwork.job_contents(bigint)', 'EXECUTE') AS may_read_contents
  FROM pgwork.job_detail(%(id)s::bigint, %(now)s::timestamptz) AS d;

-- name: job_contents :one
-- Its payload, checkpoint and result: producers and workers only (migration 16).
SELECT * FROM pgwork.job_contents(%(id)s::bigint);

-- name: recently_taken :many
-- When a worker last took a job of each type, as far as a bounded read tells (migration 16).
SELECT * FROM pgwork.recently_taken(%(job_types)s::text[], %(within)s::float8, %(now)s::timestamptz);

-- name: autovacuum_on :scalar
-- Whether autovacuum cleans pgwork.jobs: the server's setting and the table's own. With it off,
-- dead rows pile up in the claim index and every claim walks them.
SELECT current_setting('autovacuum')::boolean
       AND coalesce((SELECT option_value::boolean
                       FROM pg_catalog.pg_options_to_table(c.reloptions)
                      WHERE option_name = 'autovacuum_enabled'), true) AS autovacuum_on
  FROM pg_catalog.pg_class AS c
 WHERE c.oid = 'pgwork.jobs'::regclass;

-- name: get_result :one
SELECT r.idempotency_key, r.job_id, r.job_type, r.produced_by, r.produced_at, r.result
  FROM pgwork.job_results AS r WHERE r.idempotency_key = %(key)s;

-- name: stats :many
-- Counts capped at %(cap)s (NULL: exact), returned with the cap so a count equal to it reads as
-- "at least" (migration 0004).
-- Each type's limit beside its backlog (migration 11), so the operator's poll stays one statement.
SELECT b.*, %(cap)s::integer AS cap, l.max_running, l.rate_count, l.rate_seconds
  FROM pgwork.backlog(%(job_types)s::text[], %(cap)s::integer, coalesce(%(now)s::timestamptz, now())) AS b
  LEFT JOIN pgwork.limits(coalesce(%(now)s::timestamptz, now())) AS l ON l.job_type = b.job_type
 ORDER BY b.job_type;

-- name: running :many
SELECT * FROM pgwork.running_jobs(coalesce(%(now)s::timestamptz, now()));

-- name: retrying :many
SELECT * FROM pgwork.retrying_jobs(coalesce(%(now)s::timestamptz, now()));

-- name: dead :many
SELECT * FROM pgwork.dead_jobs() LIMIT %(limit)s;

-- name: connection_limits :one
-- The operator's connection budget (pgwork.budget): slots any role may take are max_connections
-- less superuser_reserved_connections and, on 16+, reserved_connections.
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int
       + coalesce(current_setting('reserved_connections', true), '0')::int AS reserved;

-- name: running_by_owner :many
-- How many jobs each worker holds, for the operator's pod-deletion-cost.
SELECT * FROM pgwork.running_by_owner(%(job_types)s::text[]);

-- name: listen :exec
LISTEN pgwork_jobs;

-- name: listen_finished :exec
LISTEN pgwork_finished;

-- name: job_outcome :one
-- How a job stands, for a waiting producer (migration 0005: granted with the producer profile).
SELECT * FROM pgwork.job_outcome(%(id)s::bigint);

-- name: job_status :one
-- The same without the result, for a waiting reader (the reader profile sees no results).
SELECT s.*, NULL::jsonb AS result FROM pgwork.job_status(%(id)s::bigint) AS s;
-- Bulk enqueue (Queue.enqueue_many past BULK_THRESHOLD jobs): COPY into a staging table of the
-- session's own, then one INSERT naming only the columns a producer may write, so every new row
-- starts pending with no attempts and no lease whatever the input held. A temporary table needs
-- only the TEMP privilege (PUBLIC has it unless the database revoked it), no right on pgwork.
-- name: enqueue_stage_create :exec
CREATE TEMPORARY TABLE pg_temp.pgwork_enqueue_stage (
    ord bigint, job_type text, payload jsonb, priority smallint, max_attempts smallint,
    available_at timestamptz, delay float8, idempotency_key text, trace_context jsonb, timeout_seconds float8
) ON COMMIT DROP;

-- name: enqueue_stage_copy :copy
COPY pg_temp.pgwork_enqueue_stage (ord, job_type, payload, priority, max_attempts, available_at, delay,
                                   idempotency_key, trace_context, timeout_seconds) FROM STDIN;

-- name: enqueue_stage_insert :many
INSERT INTO pgwork.jobs (job_type, payload, priority, max_attempts, available_at, idempotency_key, trace_context,
                         timeout_seconds)
SELECT s.job_type, s.payload, s.priority, s.max_attempts,
       coalesce(s.available_at, coalesce(%(now)s::timestamptz, now()) + make_interval(secs => s.delay)),
       s.idempotency_key, s.trace_context, s.timeout_seconds
  FROM pg_temp.pgwork_enqueue_stage AS s
 ORDER BY s.ord
RETURNING id;

-- name: enqueue_stage_drop :exec
DROP TABLE pg_temp.pgwork_enqueue_stage;

-- Queue.load_jobs: COPY straight into pgwork.jobs, naming only the columns a producer may write
-- (COPY needs only the INSERT privilege on the columns it lists). No ids come back, and nothing
-- runs after the stream ends, so the server's work overlaps the client's validation.
-- name: load_clock :scalar
SELECT coalesce(%(now)s::timestamptz, now()) AS now;

-- name: load_copy :copy
COPY pgwork.jobs (job_type, payload, priority, max_attempts, available_at, idempotency_key, trace_context,
                 timeout_seconds)
FROM STDIN;

-- name: prune_batch :one
-- One batch of retention for one status, from the completed_at the previous batch reached
-- (migration 0006); run in its own short transaction.
SELECT * FROM pgwork.prune_batch(%(status)s::text, %(older_than)s::float8, %(batch)s::integer,
                                 %(after)s::timestamptz, %(now)s::timestamptz);

-- name: fail_many :many
-- Many failed attempts' decided states, each applied as set_state_if_held applies one (migration 0008).
SELECT * FROM pgwork.fail_many(%(ids)s::bigint[], %(tokens)s::uuid[], %(states)s::text[], %(reasons)s::text[],
                               %(retry_delays)s::float8[], %(errors)s::text[], %(now)s::timestamptz);

-- name: set_limit :scalar
-- A type's whole limit (NULL: not limited that way); true when the type had none (migration 11).
SELECT pgwork.set_limit(%(job_type)s::text, %(max_running)s::integer, %(rate_count)s::integer,
                        %(rate_seconds)s::float8, %(now)s::timestamptz) AS created;

-- name: clear_limit :scalar
SELECT pgwork.clear_limit(%(job_type)s::text) AS cleared;

-- name: limits :many
SELECT * FROM pgwork.limits(coalesce(%(now)s::timestamptz, now()));

-- name: vacuum_holders :many
-- Who holds back vacuum on this database (issue 23, pgwork.horizon): sessions' snapshot (backend_xmin)
-- or own transaction id (backend_xid: an open transaction that wrote or locked a row holds the
-- horizon even while idle with no snapshot) in this database, and in none (a walsender's, which carries a standby's hot_standby_feedback to every
-- database); replication slots' xmin (every database) and a logical slot's catalog_xmin (this
-- database's catalogs only); prepared transactions of this database. pid, application_name and
-- backend_xmin are visible to every role; client_addr, state, query_start and xact_start only for
-- the reader's own role, superusers and members of pg_read_all_stats (NULL otherwise, so `visible`
-- is false). Never the query text: it may hold secrets. Bounded by max_connections + slots +
-- prepared transactions, and the oldest %(limit)s are returned. This reading's own pid is left out.
SELECT * FROM (
    SELECT 'session'::text AS kind, a.pid::text AS holder, a.pid, a.application_name,
           host(a.client_addr) AS client_addr, a.state, a.query_start, a.xact_start AS since,
           CASE WHEN a.backend_xmin IS NULL OR age(a.backend_xid) > age(a.backend_xmin)
                THEN a.backend_xid ELSE a.backend_xmin END::text AS xmin,
           greatest(age(a.backend_xid), age(a.backend_xmin))::bigint AS xmin_age,
           a.state IS NOT NULL AS visible
      FROM pg_stat_activity a
     WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
       AND a.pid <> pg_backend_pid()
       AND (a.datid IS NULL OR a.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()))
    UNION ALL
    SELECT 'replication slot', s.slot_name::text, s.active_pid, NULL, NULL, NULL, NULL, NULL,
           s.xmin::text, age(s.xmin)::bigint, true
      FROM pg_replication_slots s
     WHERE s.xmin IS NOT NULL
    UNION ALL
    SELECT 'replication slot (catalogs)', s.slot_name::text, s.active_pid, NULL, NULL, NULL, NULL, NULL,
           s.catalog_xmin::text, age(s.catalog_xmin)::bigint, true
      FROM pg_replication_slots s
     WHERE s.catalog_xmin IS NOT NULL AND (s.database IS NULL OR s.database = current_database())
    UNION ALL
    SELECT 'prepared transaction', p.gid, NULL, NULL, NULL, NULL, NULL, p.prepared, p.transaction::text,
           age(p.transaction)::bigint, true
      FROM pg_prepared_xacts p
     WHERE p.database = current_database()
) h
 ORDER BY h.xmin_age DESC, h.kind, h.holder
 LIMIT %(limit)s;

-- name: jobs_vacuum :one
-- The jobs table and its partitions, if any (pg_inherits): dead and live tuples, the last vacuums,
-- whether autovacuum may run on it, and whether this role sees every session (vacuum_holders).
-- Reads only catalogs and statistics views every role may read: no privilege on pgwork's schema.
WITH jobs AS (
    SELECT c.oid, c.reloptions
      FROM pg_class c
     WHERE c.relnamespace = 'pgwork'::regnamespace AND c.relname = 'jobs'
), parts AS (
    SELECT oid FROM jobs
    UNION ALL
    SELECT i.inhrelid FROM pg_inherits i JOIN jobs ON i.inhparent = jobs.oid
)
SELECT coalesce(sum(s.n_dead_tup), 0)::bigint AS dead_tuples,
       coalesce(sum(s.n_live_tup), 0)::bigint AS live_tuples,
       max(s.last_autovacuum) AS last_autovacuum,
       max(s.last_vacuum) AS last_vacuum,
       current_setting('autovacuum')::boolean AND current_setting('track_counts')::boolean AS server_autovacuum,
       coalesce((SELECT o.option_value::boolean
                   FROM jobs, pg_options_to_table(jobs.reloptions) o
                  WHERE o.option_name = 'autovacuum_enabled'), true) AS table_autovacuum,
       pg_has_role('pg_read_all_stats', 'USAGE') AS reads_all_stats,
       now() AS at
  FROM parts LEFT JOIN pg_stat_all_tables s ON s.relid = parts.oid;

-- Schedules (migration 21): open locks the schedule's row for the transaction and returns its
-- watermark; fire records and enqueues the ticks the caller decided, each once.
-- name: schedule_open :one
SELECT * FROM pgwork.schedule_open(%(name)s::text, %(cron)s::text, %(time_zone)s::text, %(job_type)s::text,
                                   %(missed)s::text, %(now)s::timestamptz);

-- name: schedule_fire :many
SELECT * FROM pgwork.schedule_fire(%(name)s::text, %(ticks)s::timestamptz[], %(until)s::timestamptz,
                                   %(next_tick)s::timestamptz, %(skipped)s::integer, %(job_type)s::text,
                                   %(payload)s::jsonb, %(priority)s::smallint, %(max_attempts)s::smallint);

-- name: schedules :many
SELECT s.name, s.cron, s.time_zone, s.job_type, s.missed, s.last_tick, s.last_job_id, s.next_tick,
       s.skipped_ticks, s.fired_at
  FROM pgwork.schedules AS s
 ORDER BY s.name;

-- name: archive_batch :one
-- One batch of archiving: succeeded and cancelled jobs completed before now - older_than, from the
-- completed_at the previous batch reached, moved to pgwork.job_history (migration 0027); run in its
-- own short transaction.
SELECT * FROM pgwork.archive_batch(%(older_than)s::float8, %(batch)s::integer, %(after)s::timestamptz,
                                   %(now)s::timestamptz);

-- name: drop_history :many
-- Retention of archived jobs: every day partition of pgwork.job_history wholly before a day,
-- detached and dropped (migration 0027).
SELECT * FROM pgwork.drop_history(%(before)s::date, %(now)s::timestamptz);
