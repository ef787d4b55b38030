-- The console's page-timing lab (scripts/console_timings.py): a history of jobs made in the
-- database itself, a batch of ids at a time (no Python round trip per job).

-- name: fill
-- Jobs first..last: nearly all succeeded over the last 12 hours, one in 200 dead (one in 1000 with a
-- rare error), one in 100 pending, one in 200 cancelled; payloads carry a tenant.
INSERT INTO pgwork.jobs (job_type, payload, status, priority, attempt_count, max_attempts, created_at,
                         available_at, started_at, completed_at, last_error, idempotency_key)
SELECT 'type-' || (g %% 8),
       jsonb_build_object('tenant', g %% 1000, 'doc', 'doc-' || g),
       (CASE WHEN g %% 200 = 0 THEN 'dead' WHEN g %% 200 = 1 THEN 'cancelled' WHEN g %% 100 = 2 THEN 'pending'
             ELSE 'succeeded' END)::pgwork.job_status,
       100, 1, 5,
       now() - make_interval(secs => 43200.0 * (%(total)s - g) / %(total)s) - interval '1 second',
       now() - make_interval(secs => 43200.0 * (%(total)s - g) / %(total)s),
       CASE WHEN g %% 100 = 2 THEN NULL ELSE now() - make_interval(secs => 43200.0 * (%(total)s - g) / %(total)s) END,
       CASE WHEN g %% 100 = 2 THEN NULL ELSE now() - make_interval(secs => 43200.0 * (%(total)s - g) / %(total)s) END,
       CASE WHEN g %% 200 = 0 THEN CASE WHEN g %% 1000 = 0 THEN 'RareError: quota exceeded for ' || g
                                        ELSE 'TimeoutError: upstream did not answer within 30s' END END,
       'lab:' || g
  FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g;

-- name: running
-- A fleet's worth of running jobs (their heartbeats a few seconds old).
INSERT INTO pgwork.jobs (job_type, payload, status, attempt_count, started_at, lease_owner, lease_token,
                         lease_expires_at, heartbeat_at, idempotency_key)
SELECT 'type-' || (g %% 8), '{}', 'running', 1, now() - interval '1 minute', 'worker-' || (g %% 20),
       gen_random_uuid(), now() + interval '30 seconds', now() - make_interval(secs => g %% 40),
       'lab-running:' || g
  FROM generate_series(1, %(count)s::bigint) AS g;
