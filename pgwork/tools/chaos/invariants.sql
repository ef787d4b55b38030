-- The chaos run's invariants, read from the tables after the run. One row of counts; the
-- judgement (which counts must be zero) is pgwork.tools.chaos.invariants.violations, a pure function.
-- %(reaper)s is the reaper session's application_name; worker sessions are named
-- pgwork-worker:<owner>, so a write's issuer can be told from the lease it ended.

-- name: figures
WITH ends AS (
    SELECT e.* FROM pgwork_chaos.events AS e WHERE e.kind = 'end'
), claims AS (
    SELECT e.* FROM pgwork_chaos.events AS e WHERE e.kind = 'claim'
), claims_per_job AS (
    SELECT c.job_id, count(*) AS n FROM claims AS c GROUP BY c.job_id
), successes AS (
    SELECT e.job_id, count(*) AS n FROM ends AS e WHERE e.new_status = 'succeeded' GROUP BY e.job_id
), paused AS (
    SELECT f.target, f.started_at, f.ended_at FROM pgwork_chaos.faults AS f WHERE f.kind = 'pause_worker'
), reclaimed_in_pause AS (
    -- Leases the reaper took from a worker while it was stopped.
    SELECT DISTINCT e.job_id, e.token, p.target, p.ended_at
      FROM ends AS e JOIN paused AS p ON e.owner = p.target
     WHERE e.writer = %(reaper)s AND e.at BETWEEN p.started_at AND p.ended_at
)
SELECT
    (SELECT count(*) FROM pgwork.jobs) AS jobs,
    (SELECT count(*) FROM pgwork.jobs WHERE status = 'succeeded') AS succeeded,
    (SELECT count(*) FROM pgwork.jobs WHERE status = 'dead') AS dead,
    (SELECT count(*) FROM pgwork.jobs WHERE status NOT IN ('succeeded', 'dead')) AS stuck,
    (SELECT count(*) FROM pgwork.jobs WHERE status = 'running') AS running,
    (SELECT count(*) FROM pgwork.job_results) AS results,
    -- Succeeded without its effect: the effect was lost.
    (SELECT count(*) FROM pgwork.jobs AS j
      WHERE j.status = 'succeeded'
        AND NOT EXISTS (SELECT 1 FROM pgwork.job_results AS r WHERE r.idempotency_key = j.idempotency_key))
        AS missing_results,
    -- An effect whose job did not succeed (written outside the succeeding transaction).
    (SELECT count(*) FROM pgwork.job_results AS r
      WHERE NOT EXISTS (SELECT 1 FROM pgwork.jobs AS j
                         WHERE j.idempotency_key = r.idempotency_key AND j.status = 'succeeded'))
        AS orphan_results,
    -- A job marked succeeded more than once: its work "done twice" as far as the queue knows.
    (SELECT count(*) FROM successes WHERE n > 1) AS duplicate_successes,
    -- More than one result row for a job (each job has its own key here).
    (SELECT count(*) FROM (SELECT r.job_id FROM pgwork.job_results AS r GROUP BY r.job_id HAVING count(*) > 1) AS d)
        AS duplicate_results,
    -- A result whose producer is not the holder of the lease that ended in success.
    (SELECT count(*) FROM pgwork.job_results AS r
      WHERE NOT EXISTS (SELECT 1 FROM ends AS e
                         WHERE e.job_id = r.job_id AND e.new_status = 'succeeded' AND e.owner = r.produced_by))
        AS results_not_by_holder,
    -- A worker session ending a lease that another owner held: a write by a stale owner.
    (SELECT count(*) FROM ends AS e
      WHERE e.writer LIKE 'pgwork-worker:%%' AND e.owner IS DISTINCT FROM substr(e.writer, 15))
        AS stale_writes,
    -- A claim that took a row another lease still held.
    (SELECT count(*) FROM ends AS e WHERE e.new_status = 'stolen') AS stolen_leases,
    (SELECT count(*) FROM claims) AS claims,
    (SELECT count(*) FROM pgwork.jobs AS j LEFT JOIN claims_per_job AS c ON c.job_id = j.id
      WHERE j.attempt_count <> coalesce(c.n, 0)) AS attempt_mismatches,
    (SELECT count(*) FROM ends AS e WHERE e.writer = %(reaper)s) AS reclaims,
    (SELECT count(*) FROM reclaimed_in_pause) AS reclaimed_from_paused,
    -- What a resumed worker wrote about a job taken from it while it was stopped, other than
    -- under a lease it claimed afresh after resuming.
    (SELECT count(*) FROM reclaimed_in_pause AS x
      WHERE EXISTS (SELECT 1 FROM ends AS e
                     WHERE e.job_id = x.job_id AND e.writer = 'pgwork-worker:' || x.target AND e.at > x.ended_at
                       AND NOT EXISTS (SELECT 1 FROM claims AS c
                                        WHERE c.job_id = e.job_id AND c.token = e.token AND c.owner = x.target
                                          AND c.at > x.ended_at))
         OR EXISTS (SELECT 1 FROM pgwork.job_results AS r
                     WHERE r.job_id = x.job_id AND r.produced_by = x.target AND r.produced_at > x.ended_at
                       AND NOT EXISTS (SELECT 1 FROM claims AS c
                                        WHERE c.job_id = r.job_id AND c.owner = x.target AND c.at > x.ended_at)))
        AS writes_after_resume,
    -- Informational: completions that landed after the lease's expiry but before any reaper
    -- took the row (the token still held it, so they were valid).
    (SELECT count(*) FROM ends AS e WHERE e.new_status = 'succeeded' AND e.at > e.lease_expires_at)
        AS late_completions;
