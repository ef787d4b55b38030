-- Least-privilege grants, by profile. `{role}` is replaced by a quoted identifier (psycopg.sql),
-- never by raw text. Each profile includes the ones before it. The role that runs `pgwork migrate`
-- owns the schema; these roles can use it and change no definitions.

-- name: reader
-- Dashboards, the operator's autoscaler: read the queue, change nothing.
GRANT USAGE ON SCHEMA pgwork TO {role};
GRANT SELECT ON ALL TABLES IN SCHEMA pgwork TO {role};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork TO {role};

-- name: worker
-- Workers and the reaper: enqueue, claim, heartbeat, finish, reap, cancel. No DELETE, no DDL.
-- UPDATE only on the columns a job's life moves (state, lease, timing, error): a worker cannot
-- rewrite what a job is (type, payload, key, priority, attempt budget) nor touch a result
-- once written.
GRANT INSERT ON pgwork.jobs TO {role};
GRANT UPDATE (status, started_at, completed_at, available_at, attempt_count, lease_owner, lease_token,
              lease_expires_at, heartbeat_at, cancel_requested_at, last_error) ON pgwork.jobs TO {role};
GRANT INSERT ON pgwork.job_results TO {role};

-- name: maintainer
-- Retention and repair: prune finished history; `pgwork retry --max-attempts` raises a budget.
GRANT DELETE ON pgwork.jobs TO {role};
GRANT UPDATE (max_attempts) ON pgwork.jobs TO {role};
