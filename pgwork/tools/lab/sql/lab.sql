-- The lab's own bookkeeping: resetting the queue between runs, reading results back from the
-- database, sampling pg_stat_activity, building history. Never used by pgwork itself.

-- name: setup
CREATE SCHEMA IF NOT EXISTS pgwork_lab;
-- Stands in for the rest of the application's writes, so transaction ids keep being consumed
-- while jobs run and a pinned xmin horizon shows up as a growing age.
CREATE TABLE IF NOT EXISTS pgwork_lab.churn (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO pgwork_lab.churn VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

-- name: reset
-- CASCADE: pgwork.job_edges (migration 22) references jobs; a baseline checkout's older schema
-- has no such table, and CASCADE empties whichever references there are.
TRUNCATE pgwork.jobs, pgwork.job_results RESTART IDENTITY CASCADE;

-- name: analyze
ANALYZE pgwork.jobs;

-- name: vacuum_analyze
-- The ready ring too: with autovacuum on, a segment that fills is analyzed within a minute, and
-- the claim's generic plan is made from what that saw (before migration 29 a segment seen holding
-- one type was read whole for another's claim; the lab, never analyzing the ring, missed it).
VACUUM (ANALYZE) pgwork.jobs, pgwork.ready;

-- name: ready_segment_now
-- The ready ring's segment a job made ready now would go to (labdb.wait_for_next_segment).
SELECT pgwork.ready_segment(clock_timestamp()) AS segment;

-- name: show_data_directory
-- scripts/cpu_per_job.py finds the embedded server's postmaster by it (the lab's own server only).
SELECT current_setting('data_directory') AS data_directory;

-- name: vacuum_database
-- Every table of the database, catalogs included: the drains' dead versions (pgwork.ready's
-- partitions, which TRUNCATE ... CASCADE does not reach, worker_leases, pgqueuer's tables, the
-- catalog rows each TRUNCATE and ANALYZE rewrite) go, whichever schema a checkout has. The lab's
-- local server may run with autovacuum off, so nothing else removes them between drains.
VACUUM;

-- name: run_summary
-- Read a run back from the database: timing is first claim to last completion.
SELECT count(*) AS jobs,
       count(*) FILTER (WHERE j.status = 'succeeded') AS succeeded,
       coalesce(sum(j.attempt_count), 0) AS attempts,
       count(*) FILTER (WHERE j.attempt_count > 1) AS inflated,
       coalesce(max(j.attempt_count), 0) AS max_attempt,
       extract(epoch FROM max(j.completed_at) - min(j.started_at))::float8 AS seconds,
       (SELECT count(*) FROM pgwork.job_results) AS results
  FROM pgwork.jobs AS j;

-- name: churn
UPDATE pgwork_lab.churn SET n = n + 1 WHERE id = 1;

-- name: activity_sample
-- What the workers' connections hold right now. backend_xid is set once a transaction has
-- written; backend_xmin while it holds a snapshot. Either pins the vacuum horizon.
SELECT count(*) FILTER (WHERE a.state = 'idle in transaction') AS idle_in_tx,
       coalesce(max(extract(epoch FROM clock_timestamp() - a.xact_start)), 0)::float8 AS longest_tx_s,
       coalesce(max(age(a.backend_xmin)), 0) AS xmin_age,
       coalesce(max(age(a.backend_xid)), 0) AS xid_age,
       count(*) AS connections
  FROM pg_stat_activity AS a
 WHERE a.datname = current_database() AND a.application_name LIKE 'pgwork-lab-worker%%';

-- name: insert_history
-- Finished jobs under the backlog, as months of use would leave them.
INSERT INTO pgwork.jobs (job_type, payload, status, attempt_count, created_at, available_at,
                         started_at, completed_at, lease_owner, idempotency_key)
SELECT 'lab', jsonb_build_object('n', g), 'succeeded', 1, t, t, t, t + interval '1 second', 'history',
       'hist-' || g
  FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g,
       LATERAL (SELECT now() - interval '30 days' + g * interval '1 millisecond' AS t) AS s;

-- name: history_rows
SELECT count(*) AS rows FROM pgwork.jobs AS j WHERE j.status = 'succeeded';

-- name: pending_rows
SELECT count(*) AS rows FROM pgwork.jobs AS j WHERE j.status = 'pending';

-- name: sizes
-- Table and index sizes on the queue table.
SELECT c.relname AS name, CASE WHEN c.relkind = 'i' THEN 'index' ELSE 'table' END AS kind,
       pg_relation_size(c.oid) AS bytes
  FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
 WHERE n.nspname = 'pgwork'
   AND (c.relname = 'jobs' OR c.oid IN (SELECT i.indexrelid FROM pg_index AS i
                                         WHERE i.indrelid = 'pgwork.jobs'::regclass))
 ORDER BY c.relkind DESC, c.relname;

-- name: create_full_index
-- The control: the claim's columns indexed over the whole table, history included.
CREATE INDEX jobs_claim_full_idx ON pgwork.jobs (priority, available_at, id);

-- name: old_claim_indexes
-- The claim indexes of schema versions 1-23 (jobs_claim_idx, jobs_claim_type_idx), which version 24
-- dropped once the claim read the ready ring: the history, prune and noisy experiments measure
-- them as a control. Already there on an older schema (a baseline checkout).
CREATE INDEX IF NOT EXISTS jobs_claim_idx ON pgwork.jobs (priority, available_at, id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS jobs_claim_type_idx ON pgwork.jobs (job_type, priority, available_at, id)
    WHERE status = 'pending';

-- name: reference_claim_index
-- The one index the reference design's claim reads (strategies.sql's skiplocked_claim takes any
-- type): jobs_claim_idx alone, so the bare loop's enqueue and claims maintain no second one.
CREATE INDEX IF NOT EXISTS jobs_claim_idx ON pgwork.jobs (priority, available_at, id) WHERE status = 'pending';

-- name: drop_old_claim_indexes
-- The control gone again where the schema has no such indexes, so later experiments' writes do
-- not maintain them; an older schema's claim still needs them.
DO $$
BEGIN
    IF (SELECT max(version) FROM pgwork.schema_version) >= 24 THEN
        DROP INDEX IF EXISTS pgwork.jobs_claim_idx, pgwork.jobs_claim_type_idx;
    END IF;
END $$;

-- name: drop_full_index
DROP INDEX pgwork.jobs_claim_full_idx;

-- name: drop_claim_index
-- Every index on the backlog, so the claim has none to use (the typed claim's own index, and the
-- backlog reading's, could each serve it); since schema 23 the claim reads the ready ring, whose
-- two claim indexes go too (its job_id index cannot serve the claim's order).
DROP INDEX pgwork.jobs_claim_idx, pgwork.jobs_claim_type_idx, pgwork.jobs_pending_due_idx, pgwork.jobs_retrying_idx,
           pgwork.ready_claim_idx, pgwork.ready_claim_type_idx;

-- name: crash_rows
-- The lab's view of each job during the crash timeline: the effective lease and heartbeat (the
-- job's own, or its worker's lease while that registration covers it: migration 15).
SELECT j.id, j.status::text AS status, j.lease_owner AS owner, j.attempt_count AS attempt,
       round(extract(epoch FROM greatest(j.lease_expires_at, w.expires_at) - clock_timestamp())::numeric, 1)::float8
           AS lease_left_s,
       round(extract(epoch FROM clock_timestamp() - greatest(j.heartbeat_at, w.heartbeat_at))::numeric, 1)::float8
           AS heartbeat_age_s,
       (SELECT count(*) FROM pgwork.job_results AS r WHERE r.job_id = j.id) AS results
  FROM pgwork.jobs AS j
  LEFT JOIN pgwork.worker_leases AS w
    ON j.status = 'running' AND w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
 ORDER BY j.id;

-- name: orphans
-- Orphan detection is a predicate: running, effective lease lapsed.
SELECT j.id, j.lease_owner AS owner,
       round(extract(epoch FROM clock_timestamp() - greatest(j.lease_expires_at, w.expires_at))::numeric, 1)::float8
           AS overdue_s
  FROM pgwork.jobs AS j
  LEFT JOIN pgwork.worker_leases AS w ON w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token
 WHERE j.status = 'running' AND greatest(j.lease_expires_at, w.expires_at) < clock_timestamp()
 ORDER BY j.id;

-- name: server_version
SELECT current_setting('server_version') AS version,
       current_setting('synchronous_commit') AS synchronous_commit,
       current_setting('shared_buffers') AS shared_buffers,
       current_setting('fsync') AS fsync;

-- name: reindex_claim_index
-- The claim index is the backlog only, so rebuilding it is cheap; it shows what the churn at
-- the head of a FIFO index (sparse leaf pages the scan must step over) costs the claim.
REINDEX INDEX pgwork.jobs_claim_idx;
REINDEX INDEX pgwork.jobs_claim_type_idx;

-- name: insert_pending
-- A backlog written straight into the table (a backfill), spread over %(types)s job types named
-- prefix-0, prefix-1, ... (one type when types is 1: the prefix itself).
INSERT INTO pgwork.jobs (job_type, payload, idempotency_key)
SELECT CASE WHEN %(types)s::int = 1 THEN %(prefix)s::text ELSE %(prefix)s::text || '-' || (g %% %(types)s::int) END,
       jsonb_build_object('n', g), %(prefix)s::text || '-key-' || g
  FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g;

-- name: insert_dead
-- Dead history over the same types: what the backlog reading must count in a bounded way.
INSERT INTO pgwork.jobs (job_type, payload, status, attempt_count, max_attempts, started_at, completed_at,
                         lease_owner, last_error, idempotency_key)
SELECT %(prefix)s::text || '-' || (g %% %(types)s::int), '{}', 'dead', 1, 1, now(), now(), 'lab', 'gave up',
       %(prefix)s::text || '-dead-' || g
  FROM generate_series(1, %(count)s::bigint) AS g;

-- name: pending_of_type
SELECT count(*) AS rows FROM pgwork.jobs AS j WHERE j.status = 'pending' AND j.job_type = %(job_type)s;

-- name: delete_pending_of_type
DELETE FROM pgwork.jobs AS j WHERE j.status = 'pending' AND j.job_type = %(job_type)s;

-- name: v3_claim
-- The control: the claim of schema versions 2-6, whose one index (jobs_claim_idx) has no job type,
-- so the type is a filter applied to every pending row ahead of the first match. Run under EXPLAIN
-- ANALYZE and rolled back, on the same table as pgwork's claim.
UPDATE pgwork.jobs AS j
   SET status = 'running', started_at = now(), attempt_count = j.attempt_count + 1,
       lease_owner = %(owner)s::text, lease_token = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => %(lease)s::float8), heartbeat_at = now(),
       cancel_requested_at = NULL
 WHERE j.id = ANY (ARRAY(
        SELECT c.id FROM pgwork.jobs AS c
         WHERE c.status = 'pending'
           AND c.available_at <= now()
           AND (%(job_types)s::text[] IS NULL OR c.job_type = ANY (%(job_types)s::text[]))
         ORDER BY c.priority, c.available_at, c.id
         LIMIT %(limit)s::integer
           FOR UPDATE SKIP LOCKED))
RETURNING j.id, j.job_type;

-- name: v3_queue_stats
-- The control: the backlog reading of schema versions 1-6 (every live row counted), as the
-- operator's poll ran it. Ages as epochs so infinite timestamps cannot stop it here.
WITH live AS (
    SELECT j.job_type, j.status, j.available_at, j.created_at, j.attempt_count, j.heartbeat_at
      FROM pgwork.jobs AS j WHERE j.status = 'pending'
    UNION ALL
    SELECT j.job_type, j.status, j.available_at, j.created_at, j.attempt_count, j.heartbeat_at
      FROM pgwork.jobs AS j WHERE j.status = 'running'
    UNION ALL
    SELECT j.job_type, j.status, j.available_at, j.created_at, j.attempt_count, j.heartbeat_at
      FROM pgwork.jobs AS j WHERE j.status = 'dead'
)
SELECT l.job_type,
       count(*) FILTER (WHERE l.status = 'pending' AND l.available_at <= now()) AS ready,
       count(*) FILTER (WHERE l.status = 'pending' AND l.available_at > now()) AS scheduled,
       count(*) FILTER (WHERE l.status = 'pending' AND l.attempt_count > 0) AS retrying,
       count(*) FILTER (WHERE l.status = 'running') AS running,
       count(*) FILTER (WHERE l.status = 'dead') AS dead,
       max(now() - l.created_at) FILTER (WHERE l.status = 'pending' AND l.available_at <= now()) AS oldest_wait,
       max(now() - l.heartbeat_at) FILTER (WHERE l.status = 'running') AS max_heartbeat_age
  FROM live AS l
 GROUP BY l.job_type
 ORDER BY l.job_type;

-- name: backlog
-- What the operator's poll runs (Queue.stats(cap=...)), for EXPLAIN.
SELECT * FROM pgwork.backlog(NULL, %(cap)s::integer, now());

-- name: exact_backlog
SELECT * FROM pgwork.backlog(NULL, NULL, now());


-- The heartbeat-cost experiment (heartbeat.py): the same renewals under each lease design.
-- name: wal_lsn
SELECT pg_current_wal_lsn()::text AS lsn;

-- name: wal_since
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %(lsn)s::pg_lsn)::bigint AS bytes;

-- name: next_xid
-- The id the next transaction will get (32-bit, as xmin holds it): rows written after this have xmin >= it.
SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint %% 4294967296 AS xid;

-- name: running_rows_written_since
-- Running job rows whose current version was written at or after `xid` (a lab run is far from wraparound).
SELECT count(*) AS rows FROM pgwork.jobs WHERE status = 'running' AND xmin::text::bigint >= %(xid)s;

-- name: xact_updates
SELECT pg_stat_get_xact_tuples_updated('pgwork.jobs'::regclass) AS updated,
       pg_stat_get_xact_tuples_hot_updated('pgwork.jobs'::regclass) AS hot;

-- name: checkpoint
CHECKPOINT;

-- name: fillfactor_85
ALTER TABLE pgwork.jobs SET (fillfactor = 85);

-- name: fillfactor_50
ALTER TABLE pgwork.jobs SET (fillfactor = 50);

-- Schema version 1's reaper index: every heartbeat changed its column, so no renewal was HOT.
-- name: create_v1_lease_index
CREATE INDEX IF NOT EXISTS lab_v1_lease_idx ON pgwork.jobs (lease_expires_at) WHERE status = 'running';

-- name: drop_v1_lease_index
DROP INDEX IF EXISTS pgwork.lab_v1_lease_idx;

-- A lease per worker, as procrastinate keeps it: one row per worker renewed, whatever it holds.
-- name: create_worker_leases
CREATE TABLE IF NOT EXISTS pgwork_lab.worker_leases (
    owner text PRIMARY KEY, heartbeat_at timestamptz NOT NULL, lease_expires_at timestamptz NOT NULL
);
TRUNCATE pgwork_lab.worker_leases;

-- name: fill_worker_leases
INSERT INTO pgwork_lab.worker_leases SELECT o, now(), now() + interval '30 seconds' FROM unnest(%(owners)s::text[]) AS o;

-- name: renew_worker_lease
UPDATE pgwork_lab.worker_leases
   SET heartbeat_at = now(), lease_expires_at = now() + interval '30 seconds'
 WHERE owner = %(owner)s;

-- name: finished_notify_off
-- The waits experiment's baseline: finishing without the completion NOTIFY of migration 5.
ALTER TABLE pgwork.jobs DISABLE TRIGGER jobs_notify_finished;

-- name: finished_notify_on
ALTER TABLE pgwork.jobs ENABLE TRIGGER jobs_notify_finished;

-- name: lab_job_status
SELECT j.status::text AS status FROM pgwork.jobs AS j WHERE j.id = %(id)s;
-- name: raw_copy
-- The bulk-enqueue baseline: COPY straight into the jobs table, no validation, no derived keys.
COPY pgwork.jobs (job_type, payload, idempotency_key) FROM STDIN;

-- name: bulk_facts
-- What a bulk load must leave: every row pending, unclaimed, with its own key.
SELECT count(*) AS jobs,
       count(*) FILTER (WHERE j.status = 'pending' AND j.attempt_count = 0 AND j.lease_token IS NULL) AS fresh,
       count(DISTINCT j.idempotency_key) AS keys
  FROM pgwork.jobs AS j;

-- name: pending_backlog
-- Claimable jobs for the prune experiment's claimer, by SQL (the bulk path is measured elsewhere).
INSERT INTO pgwork.jobs (job_type, payload, idempotency_key)
SELECT 'lab', jsonb_build_object('n', g), 'backlog-' || g FROM generate_series(1, %(jobs)s::bigint) AS g;

-- name: prune_facts
SELECT count(*) FILTER (WHERE j.status = 'succeeded' AND j.completed_at < now() - interval '7 days') AS old,
       count(*) FILTER (WHERE j.status IN ('pending', 'running')) AS live
  FROM pgwork.jobs AS j;

-- name: reindex_claim_index_concurrently
REINDEX INDEX CONCURRENTLY pgwork.jobs_claim_idx;

-- name: old_prune
-- The first migration's prune, one unordered batch per call: the baseline for prune_batch.
SELECT pgwork.prune(ARRAY['succeeded', 'cancelled'], %(older_than)s::float8, %(batch)s::integer, NULL) AS deleted;

-- name: listening_sessions
-- Workers waiting on LISTEN: the dedicated listener connection's last statement stays its LISTEN.
SELECT count(*)::int AS n
  FROM pg_stat_activity AS a
 WHERE a.datname = current_database() AND a.state = 'idle' AND a.query ILIKE 'LISTEN pgwork_jobs%%';

-- name: fleet_round
-- A burst inserted in one transaction (one created_at), read back from the rows: the insert to
-- the last completion, the first claim to the last completion, the insert to the first claim.
SELECT count(*) FILTER (WHERE j.status = 'succeeded')::int AS succeeded,
       coalesce(sum(j.attempt_count), 0)::int AS attempts,
       (SELECT count(*) FROM pgwork.job_results)::int AS results,
       extract(epoch FROM max(j.completed_at) - min(j.created_at))::float8 AS from_insert,
       extract(epoch FROM max(j.completed_at) - min(j.started_at))::float8 AS from_first_claim,
       extract(epoch FROM min(j.started_at) - min(j.created_at))::float8 AS first_claim_after
  FROM pgwork.jobs AS j;

-- name: cpu_job_figures
-- The cpu-bound experiment's handlers report their own wall and CPU seconds and page faults.
SELECT avg((r.result ->> 'wall')::float8) AS wall,
       avg((r.result ->> 'cpu')::float8) AS cpu,
       avg((r.result ->> 'faults')::float8) AS faults
  FROM pgwork.job_results AS r;

-- name: worker_backends
-- Server connections serving `pgwork worker` processes in the lab database (through PgBouncer the
-- pooler sets each server connection's application_name to its current client's).
SELECT count(*)::int AS n
  FROM pg_stat_activity AS a
 WHERE a.datname = current_database() AND a.application_name LIKE 'pgwork-worker:%%';
-- name: ref_setup
-- The mvcc experiment's reference design: the write-up's table and partial claim index, as it
-- published them (no fillfactor or autovacuum settings of its own).
CREATE TABLE IF NOT EXISTS pgwork_lab.ref_jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_type text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    status text NOT NULL DEFAULT 'pending',
    priority smallint NOT NULL DEFAULT 100,
    attempt_count smallint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    available_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    completed_at timestamptz,
    lease_owner text,
    lease_expires_at timestamptz
);
CREATE INDEX IF NOT EXISTS ref_jobs_claim_idx ON pgwork_lab.ref_jobs (priority, available_at, id)
    WHERE status = 'pending';
CREATE TABLE IF NOT EXISTS pgwork_lab.report_facts (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO pgwork_lab.report_facts VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

-- name: ref_reset
TRUNCATE pgwork_lab.ref_jobs RESTART IDENTITY;

-- name: ref_enqueue
INSERT INTO pgwork_lab.ref_jobs (job_type, payload)
SELECT 'mvcc', jsonb_build_object('n', g) FROM generate_series(1, %(count)s::integer) AS g;

-- name: ref_claim
-- The write-up's claim: one SKIP LOCKED statement.
UPDATE pgwork_lab.ref_jobs
   SET status = 'running', started_at = now(), attempt_count = attempt_count + 1,
       lease_owner = %(owner)s, lease_expires_at = now() + interval '30 seconds'
 WHERE id = (
        SELECT id FROM pgwork_lab.ref_jobs
         WHERE status = 'pending' AND available_at <= now()
         ORDER BY priority, available_at, id
           FOR UPDATE SKIP LOCKED
         LIMIT 1
 )
RETURNING id;

-- name: ref_complete
UPDATE pgwork_lab.ref_jobs SET status = 'succeeded', completed_at = now(), lease_owner = NULL,
       lease_expires_at = NULL
 WHERE id = %(id)s AND status = 'running';

-- name: mvcc_sample
-- One sample per system: backlog (pending rows) and the dead tuples of its queue table, from the statistics views (approximate, as autovacuum reads them).
SELECT 'pgwork' AS system,
       (SELECT count(*) FROM pgwork.jobs WHERE status = 'pending') AS backlog,
       (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables
         WHERE schemaname = 'pgwork' AND (relname LIKE 'jobs%%' OR relname LIKE 'ready%%')) AS dead
UNION ALL
SELECT 'reference',
       (SELECT count(*) FROM pgwork_lab.ref_jobs WHERE status = 'pending'),
       (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables
         WHERE schemaname = 'pgwork_lab' AND relname = 'ref_jobs')
;

-- name: mvcc_sample_pgqueuer
-- The peer's table, once its lane installed it (its pending rows are 'queued').
SELECT 'pgqueuer' AS system,
       (SELECT count(*) FROM public.pgqueuer WHERE status = 'queued') AS backlog,
       (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables
         WHERE schemaname = 'public' AND relname = 'pgqueuer') AS dead;

-- name: mvcc_autovacuums
-- Autovacuum runs so far on pgwork's tables (the ring's segments, jobs, results): under a held
-- horizon each one removes nothing, and autovacuum starts another at its next look.
SELECT coalesce(sum(autovacuum_count), 0)::bigint AS runs FROM pg_stat_user_tables WHERE schemaname = 'pgwork';

-- name: mvcc_has_pgqueuer
SELECT to_regclass('public.pgqueuer') IS NOT NULL AS present;

-- name: mvcc_hold_jobs
-- Case (a): a report that read the queue tables, then sits idle in its REPEATABLE READ snapshot.
SELECT (SELECT count(*) FROM pgwork.jobs) + (SELECT count(*) FROM pgwork_lab.ref_jobs) AS n;

-- name: mvcc_hold_other
-- Case (b): a report that read only another table.
SELECT n FROM pgwork_lab.report_facts WHERE id = 1;

-- name: mvcc_reset_pgwork
TRUNCATE pgwork.jobs, pgwork.job_results RESTART IDENTITY CASCADE;

-- name: mvcc_vacuum
VACUUM (ANALYZE) pgwork.jobs, pgwork.ready;
