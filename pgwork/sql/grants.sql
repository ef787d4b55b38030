-- Least-privilege grants, by profile. `{role}` is replaced by a quoted identifier (psycopg.sql),
-- never by raw text. Each profile includes the ones before it. The role that runs `pgwork migrate`
-- owns the schema; these roles can use it and change no definitions.

-- name: reader
-- Dashboards, the operator's autoscaler: read the queue, change nothing.
GRANT USAGE ON SCHEMA pgwork TO {role};
GRANT SELECT ON ALL TABLES IN SCHEMA pgwork TO {role};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork TO {role};

-- name: worker
-- Workers and the reaper: enqueue, claim, heartbeat, finish, reap. No DELETE, no DDL.
GRANT INSERT, UPDATE ON pgwork.jobs TO {role};
GRANT INSERT ON pgwork.job_results TO {role};

-- name: maintainer
-- Retention: prune finished history.
GRANT DELETE ON pgwork.jobs TO {role};
