-- Every statement pgwork sends, by name. Loaded by pgwork.sql_files; the Queue class is the
-- only caller. Parameters are psycopg named placeholders. Time-dependent statements take
-- %(now)s, which is NULL in production (the server's clock) and a fixed instant in tests.

-- name: server_encoding
SHOW server_encoding;

-- name: schema_version
SELECT coalesce(max(version), 0) AS version FROM pgwork.schema_version;

-- name: schema_exists
SELECT to_regclass('pgwork.schema_version') IS NOT NULL AS present;

-- name: migrate_lock
-- Held until the migrating transaction ends, so concurrent migrators run one after another.
SELECT pg_advisory_xact_lock(hashtext('pgwork.migrate'));

-- name: migrate_bootstrap
CREATE SCHEMA IF NOT EXISTS pgwork;
CREATE TABLE IF NOT EXISTS pgwork.schema_version (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migrate_record
INSERT INTO pgwork.schema_version (version, name) VALUES (%(version)s, %(name)s);

-- name: enqueue
INSERT INTO pgwork.jobs (job_type, payload, priority, max_attempts, available_at, idempotency_key, trace_context)
SELECT t.job_type, t.payload, t.priority, t.max_attempts,
       coalesce(t.available_at, coalesce(%(now)s::timestamptz, now()) + make_interval(secs => t.delay)),
       t.idempotency_key, t.trace_context
  FROM unnest(%(job_types)s::text[], %(payloads)s::jsonb[], %(priorities)s::smallint[],
              %(max_attempts)s::smallint[], %(available_ats)s::timestamptz[], %(delays)s::float8[],
              %(keys)s::text[], %(trace_contexts)s::jsonb[])
       WITH ORDINALITY AS t(job_type, payload, priority, max_attempts, available_at, delay,
                            idempotency_key, trace_context, ord)
 ORDER BY t.ord
RETURNING id;

-- name: claim
-- One statement: choose, lock (skipping rows another claimer holds) and mark. The inner
-- ORDER BY matches jobs_claim_idx so the scan stops at the first qualifying rows. The ids go
-- out as an array, so the outer UPDATE is a primary-key lookup whatever the plan: as `IN
-- (...)` a prepared (generic) plan, not knowing the limit, joined against a scan of the whole
-- table.
UPDATE pgwork.jobs AS j
   SET status = 'running',
       started_at = coalesce(%(now)s::timestamptz, now()),
       attempt_count = j.attempt_count + 1,
       lease_owner = %(owner)s,
       lease_token = gen_random_uuid(),
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease)s),
       heartbeat_at = coalesce(%(now)s::timestamptz, now()),
       cancel_requested_at = NULL
 WHERE j.id = ANY (ARRAY(
        SELECT c.id FROM pgwork.jobs AS c
         WHERE c.status = 'pending'
           AND c.available_at <= coalesce(%(now)s::timestamptz, now())
           AND (%(job_types)s::text[] IS NULL OR c.job_type = ANY (%(job_types)s::text[]))
         ORDER BY c.priority, c.available_at, c.id
         LIMIT %(limit)s
           FOR UPDATE SKIP LOCKED))
RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
          j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
          j.created_at, j.last_error;

-- name: claim_one
-- `claim` with LIMIT 1 written in, for the common one-job claim: with the limit a parameter
-- the server plans the statement afresh on every execution (its custom plans look cheaper
-- than a generic one), about a quarter of a claim's cost; fixed, the prepared plan is reused.
-- Keep it identical to `claim` otherwise (tests/lab/test_claim_one.py checks).
UPDATE pgwork.jobs AS j
   SET status = 'running',
       started_at = coalesce(%(now)s::timestamptz, now()),
       attempt_count = j.attempt_count + 1,
       lease_owner = %(owner)s,
       lease_token = gen_random_uuid(),
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease)s),
       heartbeat_at = coalesce(%(now)s::timestamptz, now()),
       cancel_requested_at = NULL
 WHERE j.id = ANY (ARRAY(
        SELECT c.id FROM pgwork.jobs AS c
         WHERE c.status = 'pending'
           AND c.available_at <= coalesce(%(now)s::timestamptz, now())
           AND (%(job_types)s::text[] IS NULL OR c.job_type = ANY (%(job_types)s::text[]))
         ORDER BY c.priority, c.available_at, c.id
         LIMIT 1
           FOR UPDATE SKIP LOCKED))
RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
          j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
          j.created_at, j.last_error;

-- name: heartbeat
-- Fenced by the per-claim token: a worker whose job was reclaimed matches nothing.
-- Returns one row per lease still held, with whether cancellation was requested.
UPDATE pgwork.jobs AS j
   SET heartbeat_at = coalesce(%(now)s::timestamptz, now()),
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease)s)
  FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS l(id, token)
 WHERE j.id = l.id AND j.lease_token = l.token AND j.status = 'running'
RETURNING j.id, j.cancel_requested_at IS NOT NULL AS cancel_requested, j.lease_expires_at;

-- name: succeed
-- Mark succeeded and write the effect in one statement (so one transaction), both fenced:
-- if the token no longer holds the row, `fenced` is empty and nothing is inserted.
WITH fenced AS (
    UPDATE pgwork.jobs AS j
       SET status = 'succeeded',
           completed_at = coalesce(%(now)s::timestamptz, now()),
           lease_token = NULL,
           lease_expires_at = NULL,
           cancel_requested_at = NULL
     WHERE j.id = %(id)s AND j.lease_token = %(token)s AND j.status = 'running'
    RETURNING j.id, j.job_type, j.idempotency_key
), inserted AS (
    INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
    SELECT f.idempotency_key, f.id, f.job_type, %(owner)s, %(result)s FROM fenced AS f
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING idempotency_key
)
SELECT (SELECT count(*) FROM fenced) AS fenced, (SELECT count(*) FROM inserted) AS inserted;

-- name: succeed_many
-- The batched form of succeed: one statement for many leases, each still fenced by its own
-- token, each result written once per idempotency key (a key already present, or shared by
-- two jobs of the batch, keeps its first row). One row back per job that was still held.
WITH input AS (
    SELECT t.id, t.token, t.owner, t.result
      FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(owners)s::text[], %(results)s::jsonb[])
           AS t(id, token, owner, result)
), fenced AS (
    UPDATE pgwork.jobs AS j
       SET status = 'succeeded',
           completed_at = coalesce(%(now)s::timestamptz, now()),
           lease_token = NULL,
           lease_expires_at = NULL,
           cancel_requested_at = NULL
      FROM input AS i
     WHERE j.id = i.id AND j.lease_token = i.token AND j.status = 'running'
    RETURNING j.id, j.job_type, j.idempotency_key, i.owner, i.result
), inserted AS (
    INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
    SELECT f.idempotency_key, f.id, f.job_type, f.owner, f.result FROM fenced AS f ORDER BY f.id
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING job_id
)
SELECT f.id, EXISTS (SELECT 1 FROM inserted AS n WHERE n.job_id = f.id) AS inserted FROM fenced AS f;

-- name: fail
-- Retry (pending, pushed into the future) while attempts remain and the error is retryable;
-- otherwise dead. last_error always keeps the newest error.
UPDATE pgwork.jobs AS j
   SET status = CASE WHEN %(retryable)s AND j.attempt_count < j.max_attempts
                     THEN 'pending'::pgwork.job_status ELSE 'dead'::pgwork.job_status END,
       available_at = CASE WHEN %(retryable)s AND j.attempt_count < j.max_attempts
                           THEN coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(delay)s)
                           ELSE j.available_at END,
       completed_at = CASE WHEN %(retryable)s AND j.attempt_count < j.max_attempts
                           THEN NULL ELSE coalesce(%(now)s::timestamptz, now()) END,
       started_at = CASE WHEN %(retryable)s AND j.attempt_count < j.max_attempts
                         THEN NULL ELSE j.started_at END,
       last_error = %(error)s,
       lease_owner = CASE WHEN %(retryable)s AND j.attempt_count < j.max_attempts
                          THEN NULL ELSE j.lease_owner END,
       lease_token = NULL,
       lease_expires_at = NULL,
       cancel_requested_at = NULL
 WHERE j.id = %(id)s AND j.lease_token = %(token)s AND j.status = 'running'
RETURNING j.status::text AS status, j.available_at, j.attempt_count, j.max_attempts;

-- name: release
-- Hand a job back untouched by failure (graceful shutdown). attempt_count keeps counting
-- claims: the release is recorded in last_error, not refunded.
UPDATE pgwork.jobs AS j
   SET status = 'pending',
       available_at = coalesce(%(now)s::timestamptz, now()),
       started_at = NULL,
       lease_owner = NULL,
       lease_token = NULL,
       lease_expires_at = NULL,
       last_error = right(coalesce(j.last_error || ' ', '') || %(note)s, 8000)
 WHERE j.id = %(id)s AND j.lease_token = %(token)s AND j.status = 'running'
   AND j.cancel_requested_at IS NULL
RETURNING j.id;

-- name: acknowledge_cancel
-- The holder of a job whose cancellation was requested stops and records it.
UPDATE pgwork.jobs AS j
   SET status = 'cancelled',
       completed_at = coalesce(%(now)s::timestamptz, now()),
       lease_token = NULL,
       lease_expires_at = NULL,
       last_error = right(coalesce(j.last_error || ' ', '') || %(note)s, 8000)
 WHERE j.id = %(id)s AND j.lease_token = %(token)s AND j.status = 'running'
   AND j.cancel_requested_at IS NOT NULL
RETURNING j.id;

-- name: reap
-- Running rows whose lease lapsed. Status and expiry are re-checked by this same statement
-- under the row lock, so a job completed a moment earlier is left alone. attempt_count is
-- kept: a job that keeps killing its worker runs out of attempts and goes dead instead of
-- retrying forever; a job whose cancellation was requested ends cancelled.
WITH expired AS (
    SELECT r.id FROM pgwork.jobs AS r
     WHERE r.status = 'running' AND r.lease_expires_at < coalesce(%(now)s::timestamptz, now())
     ORDER BY r.lease_expires_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), before AS (
    SELECT j.id, j.lease_owner, j.lease_expires_at FROM pgwork.jobs AS j JOIN expired USING (id)
)
UPDATE pgwork.jobs AS j
   SET status = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'::pgwork.job_status
                     WHEN j.attempt_count >= j.max_attempts THEN 'dead'::pgwork.job_status
                     ELSE 'pending'::pgwork.job_status END,
       available_at = coalesce(%(now)s::timestamptz, now()),
       started_at = NULL,
       completed_at = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt_count >= j.max_attempts
                           THEN coalesce(%(now)s::timestamptz, now()) END,
       lease_owner = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt_count >= j.max_attempts
                          THEN j.lease_owner END,
       lease_token = NULL,
       lease_expires_at = NULL,
       last_error = right(coalesce(j.last_error || ' ', '')
                          || format('[lease expired, reclaimed from %%s at %%s]', j.lease_owner,
                                    coalesce(%(now)s::timestamptz, now())), 8000)
  FROM before AS b
 WHERE j.id = b.id AND j.status = 'running' AND j.lease_expires_at < coalesce(%(now)s::timestamptz, now())
RETURNING j.id, j.job_type, b.lease_owner AS previous_owner, j.attempt_count, j.status::text AS status,
          extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - b.lease_expires_at)::float8
              AS overdue_seconds;

-- name: retry
-- Requeue dead (or cancelled) jobs now, optionally raising max_attempts.
UPDATE pgwork.jobs AS j
   SET status = 'pending',
       available_at = coalesce(%(now)s::timestamptz, now()),
       completed_at = NULL,
       started_at = NULL,
       lease_owner = NULL,
       max_attempts = coalesce(%(max_attempts)s::smallint, j.max_attempts),
       last_error = right(coalesce(j.last_error || ' ', '')
                          || format('[requeued by hand at %%s]', coalesce(%(now)s::timestamptz, now())), 8000)
 WHERE j.id = ANY (%(ids)s::bigint[]) AND j.status IN ('dead', 'cancelled')
RETURNING j.id;

-- name: cancel_pending
UPDATE pgwork.jobs AS j
   SET status = 'cancelled',
       completed_at = coalesce(%(now)s::timestamptz, now()),
       last_error = right(coalesce(j.last_error || ' ', '')
                          || format('[cancelled at %%s]', coalesce(%(now)s::timestamptz, now())), 8000)
 WHERE j.id = ANY (%(ids)s::bigint[]) AND j.status = 'pending'
RETURNING j.id;

-- name: cancel_running
-- A running job is not taken from its holder: the request is seen at the next heartbeat.
UPDATE pgwork.jobs AS j
   SET cancel_requested_at = coalesce(j.cancel_requested_at, coalesce(%(now)s::timestamptz, now()))
 WHERE j.id = ANY (%(ids)s::bigint[]) AND j.status = 'running'
RETURNING j.id;

-- name: prune
-- Delete finished history older than the cut-off, in bounded batches so no statement holds
-- locks for long. job_results are the effect and are never pruned here.
WITH doomed AS (
    SELECT p.id FROM pgwork.jobs AS p
     WHERE p.status = ANY (%(statuses)s::pgwork.job_status[])
       AND p.completed_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(older_than)s)
     LIMIT %(batch)s
)
DELETE FROM pgwork.jobs AS j USING doomed WHERE j.id = doomed.id;

-- name: statuses
SELECT j.id, j.status::text AS status FROM pgwork.jobs AS j WHERE j.id = ANY (%(ids)s::bigint[]);

-- name: get_job
SELECT j.id, j.job_type, j.payload, j.status::text AS status, j.priority, j.attempt_count,
       j.max_attempts, j.created_at, j.available_at, j.started_at, j.completed_at,
       j.lease_owner, j.lease_token, j.lease_expires_at, j.heartbeat_at, j.cancel_requested_at,
       j.last_error, j.idempotency_key, j.trace_context
  FROM pgwork.jobs AS j WHERE j.id = %(id)s;

-- name: get_result
SELECT r.idempotency_key, r.job_id, r.job_type, r.produced_by, r.produced_at, r.result
  FROM pgwork.job_results AS r WHERE r.idempotency_key = %(key)s;

-- name: stats
SELECT * FROM pgwork.queue_stats(%(job_types)s::text[], coalesce(%(now)s::timestamptz, now()));

-- name: running
SELECT * FROM pgwork.running_jobs(coalesce(%(now)s::timestamptz, now()));

-- name: retrying
SELECT * FROM pgwork.retrying_jobs(coalesce(%(now)s::timestamptz, now()));

-- name: dead
SELECT * FROM pgwork.dead_jobs() LIMIT %(limit)s;

-- name: running_by_owner
-- How many jobs each worker holds, for the operator's pod-deletion-cost.
SELECT j.lease_owner AS owner, count(*) AS jobs
  FROM pgwork.jobs AS j
 WHERE j.status = 'running'
   AND (%(job_types)s::text[] IS NULL OR j.job_type = ANY (%(job_types)s::text[]))
 GROUP BY j.lease_owner;

-- name: listen
LISTEN pgwork_jobs;
