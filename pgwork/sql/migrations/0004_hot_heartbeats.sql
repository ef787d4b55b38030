-- pgwork schema, version 4: heartbeats are HOT updates.
--
-- A heartbeat sets heartbeat_at and lease_expires_at on every job its worker holds. Version 1
-- indexed lease_expires_at for the reaper, and PostgreSQL can keep an update on the page without
-- touching any index (a heap-only tuple, HOT) only when no indexed column changes: so every
-- renewal of every running row wrote a new row version on some page plus an entry in each of the
-- row's indexes (jobs_pkey, the idempotency key, jobs_lease_idx), and vacuum had all of that to
-- clean. With 200 jobs running that is the bulk of a queue's WAL while nothing else happens.
--
-- The reaper still reads only jobs in flight: the index below holds one entry per running job
-- (its size is the fleet's in-flight count, never history), and the reaper filters those few
-- for an expired lease instead of seeking it. The index's column is the owner, which a heartbeat
-- never changes, so renewals stay HOT; it also serves the operator's "jobs per pod" reading.
-- No column that a heartbeat writes may ever be indexed again (tests/core/test_heartbeat_hot.py
-- checks that renewals are HOT and the reaper's plan stays on this index).

DROP INDEX pgwork.jobs_lease_idx;
CREATE INDEX jobs_running_idx ON pgwork.jobs (lease_owner) WHERE status = 'running';
