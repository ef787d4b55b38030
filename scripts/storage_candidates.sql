-- Storage candidates for issue 23 (scripts/storage_candidates.py): prototypes, never installed by
-- pgwork. B: a small hot table for pending/running, finished jobs moved to a history table
-- partitioned by time. C: the hot set in a ring of list partitions ("segments"); enqueue writes the
-- current one, the claim reads only open ones, a drained segment is TRUNCATEd.

-- name: b_setup
DROP SCHEMA IF EXISTS cand_b CASCADE;
CREATE SCHEMA cand_b;
CREATE TABLE cand_b.live (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL DEFAULT 'pending',
    priority smallint NOT NULL DEFAULT 100, attempt_count smallint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(), available_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz, lease_owner text, lease_token uuid, lease_expires_at timestamptz,
    idempotency_key text NOT NULL
) WITH (fillfactor = 85);
CREATE INDEX live_claim_idx ON cand_b.live (job_type, priority, available_at, id) WHERE status = 'pending';
CREATE TABLE cand_b.history (
    id bigint NOT NULL, job_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL,
    attempt_count smallint NOT NULL, created_at timestamptz NOT NULL, started_at timestamptz,
    completed_at timestamptz NOT NULL, idempotency_key text NOT NULL
) PARTITION BY RANGE (completed_at);
CREATE TABLE cand_b.history_default PARTITION OF cand_b.history DEFAULT;

-- name: b_enqueue
INSERT INTO cand_b.live (job_type, payload, idempotency_key)
SELECT 'bench', jsonb_build_object('n', g), gen_random_uuid()::text FROM generate_series(1, %(n)s::integer) AS g;

-- name: b_claim
UPDATE cand_b.live AS l
   SET status = 'running', attempt_count = l.attempt_count + 1, started_at = now(), lease_owner = 'bench',
       lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds'
 WHERE l.id = (SELECT c.id FROM cand_b.live AS c
                WHERE c.job_type = 'bench' AND c.status = 'pending' AND c.available_at <= now()
                ORDER BY c.priority, c.available_at, c.id
                  FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING 0::smallint AS seg, l.id, l.lease_token;

-- name: b_finish
WITH d AS (DELETE FROM cand_b.live WHERE id = %(id)s AND lease_token = %(token)s RETURNING *)
INSERT INTO cand_b.history
SELECT d.id, d.job_type, d.payload, 'succeeded', d.attempt_count, d.created_at, d.started_at, now(), d.idempotency_key
  FROM d;

-- name: b_dead
SELECT coalesce(sum(n_dead_tup), 0)::bigint AS dead FROM pg_stat_user_tables WHERE schemaname = 'cand_b' AND relname = 'live';

-- name: b_read
SELECT count(*) FROM cand_b.live;

-- name: c_setup
DROP SCHEMA IF EXISTS cand_c CASCADE;
CREATE SCHEMA cand_c;
CREATE SEQUENCE cand_c.ids;
CREATE TABLE cand_c.live (
    seg smallint NOT NULL, id bigint NOT NULL,
    job_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL DEFAULT 'pending',
    priority smallint NOT NULL DEFAULT 100, attempt_count smallint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(), available_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz, lease_owner text, lease_token uuid, lease_expires_at timestamptz,
    idempotency_key text NOT NULL,
    PRIMARY KEY (seg, id)
) PARTITION BY LIST (seg);
DO $$ BEGIN
    FOR s IN 0..7 LOOP
        EXECUTE format('CREATE TABLE cand_c.live_%s PARTITION OF cand_c.live FOR VALUES IN (%s) WITH (fillfactor = 85)', s, s);
    END LOOP;
END $$;
CREATE INDEX live_claim_idx ON cand_c.live (job_type, priority, available_at, id) WHERE status = 'pending';
-- The ring: which segment takes new jobs, and which the claim reads (those that may hold pending jobs).
CREATE TABLE cand_c.ring (one boolean PRIMARY KEY DEFAULT true, current smallint NOT NULL, open smallint[] NOT NULL);
INSERT INTO cand_c.ring VALUES (true, 0, '{0}');
CREATE TABLE cand_c.history (
    id bigint NOT NULL, job_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL,
    attempt_count smallint NOT NULL, created_at timestamptz NOT NULL, started_at timestamptz,
    completed_at timestamptz NOT NULL, idempotency_key text NOT NULL
) PARTITION BY RANGE (completed_at);
CREATE TABLE cand_c.history_default PARTITION OF cand_c.history DEFAULT;

-- name: c_enqueue
INSERT INTO cand_c.live (seg, id, job_type, payload, idempotency_key)
SELECT r.current, nextval('cand_c.ids'), 'bench', jsonb_build_object('n', g), gen_random_uuid()::text
  FROM cand_c.ring AS r, generate_series(1, %(n)s::integer) AS g;

-- name: c_ring
SELECT current, open FROM cand_c.ring;

-- name: c_claim
-- The open segments come as literals (custom plan), so the planner prunes the closed ones: their
-- dead entries are never walked.
UPDATE cand_c.live AS l
   SET status = 'running', attempt_count = l.attempt_count + 1, started_at = now(), lease_owner = 'bench',
       lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds'
 WHERE l.seg = ANY(%(open)s::smallint[])
   AND (l.seg, l.id) = (SELECT c.seg, c.id FROM cand_c.live AS c
                         WHERE c.seg = ANY(%(open)s::smallint[])
                           AND c.job_type = 'bench' AND c.status = 'pending' AND c.available_at <= now()
                         ORDER BY c.priority, c.available_at, c.id
                           FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING l.seg, l.id, l.lease_token;

-- name: c_finish
WITH d AS (DELETE FROM cand_c.live WHERE seg = %(seg)s AND id = %(id)s AND lease_token = %(token)s RETURNING *)
INSERT INTO cand_c.history
SELECT d.id, d.job_type, d.payload, 'succeeded', d.attempt_count, d.created_at, d.started_at, now(), d.idempotency_key
  FROM d;

-- name: c_advance
-- Rotate: the next segment takes new jobs once it is empty (truncated).
UPDATE cand_c.ring SET current = %(next)s, open = array_append(open, %(next)s::smallint) WHERE current <> %(next)s;

-- name: c_close
UPDATE cand_c.ring SET open = array_remove(open, %(seg)s::smallint) WHERE current <> %(seg)s;

-- name: c_dead
SELECT coalesce(sum(n_dead_tup), 0)::bigint AS dead FROM pg_stat_user_tables WHERE schemaname = 'cand_c' AND relname LIKE 'live_%%';

-- name: c_read
SELECT count(*) FROM cand_c.live;

-- name: other_read
SELECT count(*) FROM pg_class;

-- name: a_enqueue
INSERT INTO pgwork.jobs (job_type, payload, idempotency_key)
SELECT 'bench', jsonb_build_object('n', g), gen_random_uuid()::text FROM generate_series(1, %(n)s::integer) AS g;

-- name: b_claim_many
UPDATE cand_b.live AS l
   SET status = 'running', attempt_count = l.attempt_count + 1, started_at = now(), lease_owner = 'churn',
       lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds'
 WHERE l.id IN (SELECT c.id FROM cand_b.live AS c
                 WHERE c.job_type = 'bench' AND c.status = 'pending' AND c.available_at <= now()
                 ORDER BY c.priority, c.available_at, c.id
                   FOR UPDATE SKIP LOCKED LIMIT %(n)s);

-- name: b_finish_all
WITH d AS (DELETE FROM cand_b.live WHERE status = 'running' RETURNING *)
INSERT INTO cand_b.history
SELECT d.id, d.job_type, d.payload, 'succeeded', d.attempt_count, d.created_at, d.started_at, now(), d.idempotency_key
  FROM d;

-- name: c_claim_many
UPDATE cand_c.live AS l
   SET status = 'running', attempt_count = l.attempt_count + 1, started_at = now(), lease_owner = 'churn',
       lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds'
 WHERE l.seg = ANY(%(open)s::smallint[])
   AND (l.seg, l.id) IN (SELECT c.seg, c.id FROM cand_c.live AS c
                          WHERE c.seg = ANY(%(open)s::smallint[])
                            AND c.job_type = 'bench' AND c.status = 'pending' AND c.available_at <= now()
                          ORDER BY c.priority, c.available_at, c.id
                            FOR UPDATE SKIP LOCKED LIMIT %(n)s);

-- name: c_finish_all
WITH d AS (DELETE FROM cand_c.live WHERE status = 'running' RETURNING *)
INSERT INTO cand_c.history
SELECT d.id, d.job_type, d.payload, 'succeeded', d.attempt_count, d.created_at, d.started_at, now(), d.idempotency_key
  FROM d;
