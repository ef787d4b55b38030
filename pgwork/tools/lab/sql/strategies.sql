-- The claim strategies the lab compares with pgwork's own claim (pgwork/sql/queries.sql: claim).
-- Some are deliberately wrong; they live here, never in pgwork/sql, so nothing else can call them.
-- Lab statements stamp times with clock_timestamp(): inside the held transaction now() would be
-- the transaction's start, not the moment of the write.

-- name: naive_select
-- Naive, step 1: read the head of the queue. At Read Committed another worker running this at
-- the same instant sees the same row.
SELECT j.id FROM pgwork.jobs AS j
 WHERE j.status = 'pending' AND j.available_at <= now()
 ORDER BY j.priority, j.available_at, j.id
 LIMIT 1;

-- name: naive_update
-- Naive, step 2: mark it, without re-checking that it is still pending. Every collision
-- increments attempt_count once more and hands the job to one more worker.
UPDATE pgwork.jobs AS j
   SET status = 'running',
       started_at = clock_timestamp(),
       attempt_count = j.attempt_count + 1,
       lease_owner = %(owner)s,
       lease_token = gen_random_uuid(),
       lease_expires_at = clock_timestamp() + interval '30 seconds',
       heartbeat_at = clock_timestamp()
 WHERE j.id = %(id)s
RETURNING j.id;

-- name: blocking_claim
-- One statement, but FOR UPDATE without SKIP LOCKED: claimers queue behind the head row's
-- lock; when it is released the row no longer qualifies and the waiter gets nothing back.
UPDATE pgwork.jobs AS j
   SET status = 'running',
       started_at = clock_timestamp(),
       attempt_count = j.attempt_count + 1,
       lease_owner = %(owner)s,
       lease_token = gen_random_uuid(),
       lease_expires_at = clock_timestamp() + interval '30 seconds',
       heartbeat_at = clock_timestamp()
 WHERE j.id = (
        SELECT c.id FROM pgwork.jobs AS c
         WHERE c.status = 'pending' AND c.available_at <= now()
         ORDER BY c.priority, c.available_at, c.id
         LIMIT 1
           FOR UPDATE)
RETURNING j.id;

-- name: skiplocked_claim
-- The reference design's claim, one SKIP LOCKED statement. The bare loop runs it in autocommit
-- (its own transaction) before `complete`; the held-transaction design runs it inside a
-- transaction the worker keeps open across the work and commits together with the completion.
UPDATE pgwork.jobs AS j
   SET status = 'running',
       started_at = clock_timestamp(),
       attempt_count = j.attempt_count + 1,
       lease_owner = %(owner)s,
       lease_token = gen_random_uuid(),
       lease_expires_at = clock_timestamp() + interval '30 seconds',
       heartbeat_at = clock_timestamp()
 WHERE j.id = (
        SELECT c.id FROM pgwork.jobs AS c
         WHERE c.status = 'pending' AND c.available_at <= now()
         ORDER BY c.priority, c.available_at, c.id
         LIMIT 1
           FOR UPDATE SKIP LOCKED)
RETURNING j.id;

-- name: advisory_candidates
-- Advisory locks, step 1: a few candidates from the head of the queue, no row locks.
SELECT j.id FROM pgwork.jobs AS j
 WHERE j.status = 'pending' AND j.available_at <= now()
 ORDER BY j.priority, j.available_at, j.id
 LIMIT %(limit)s;

-- name: advisory_try_lock
-- Step 2: a session-level lock on the job id, held across the work (no transaction open,
-- but the connection is pinned to the job).
SELECT pg_try_advisory_lock(%(id)s::bigint) AS locked;

-- name: advisory_mark
-- Step 3: mark it, re-checking the status: the candidate list is a snapshot, and a job
-- finished (and unlocked) by another worker since would otherwise run twice.
UPDATE pgwork.jobs AS j
   SET status = 'running',
       started_at = clock_timestamp(),
       attempt_count = j.attempt_count + 1,
       lease_owner = %(owner)s,
       lease_token = gen_random_uuid(),
       lease_expires_at = clock_timestamp() + interval '30 seconds',
       heartbeat_at = clock_timestamp()
 WHERE j.id = %(id)s AND j.status = 'pending'
RETURNING j.id;

-- name: advisory_unlock
SELECT pg_advisory_unlock(%(id)s::bigint) AS unlocked;

-- name: complete
-- Completion for the lab strategies: unfenced (they have no token discipline), the result
-- written once per key as pgwork does.
WITH done AS (
    UPDATE pgwork.jobs AS j
       SET status = 'succeeded', completed_at = clock_timestamp(),
           lease_token = NULL, lease_expires_at = NULL
     WHERE j.id = %(id)s
    RETURNING j.id, j.job_type, j.idempotency_key
)
INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
SELECT d.idempotency_key, d.id, d.job_type, %(owner)s, '{"ok": true}'::jsonb FROM done AS d
ON CONFLICT (idempotency_key) DO NOTHING;

-- name: pending_left
SELECT count(*) AS pending FROM pgwork.jobs AS j WHERE j.status = 'pending';
