-- The chaos harness's own record of what happened to every job, kept by triggers inside the
-- same transactions as the claims and completions they describe (so a claim rolled back by a
-- lost connection leaves no record, and a committed one always does). Independent of
-- attempt_count and of the worker's own bookkeeping. Installed only into chaos databases.

-- name: install
CREATE SCHEMA pgwork_chaos;

-- One row per claim (kind 'claim') and per end of a claim (kind 'end': the row left 'running',
-- by completion, failure, release, cancellation or the reaper). `writer` is the session's
-- application_name, which the worker sets to pgwork-worker:<id>: it says who issued the write,
-- where `owner` says who held the lease being ended.
CREATE TABLE pgwork_chaos.events (
    seq              bigserial   PRIMARY KEY,
    job_id           bigint      NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('claim', 'end')),
    owner            text,
    token            uuid,
    attempt          integer     NOT NULL,
    new_status       text        NOT NULL,
    lease_expires_at timestamptz,
    writer           text        NOT NULL,
    at               timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX events_job_idx ON pgwork_chaos.events (job_id, seq);

-- Faults the injector caused, written once the run is over (the database may be down while
-- they happen). Times come from the harness's clock, which is this machine's clock.
CREATE TABLE pgwork_chaos.faults (
    kind       text        NOT NULL,
    target     text,
    started_at timestamptz NOT NULL,
    ended_at   timestamptz NOT NULL
);

-- SECURITY DEFINER: workers run as a least-privilege role that has no rights on this schema.
-- The expiry recorded at a lease's end is the effective one (migration 15): the job's own, or
-- its worker's lease while that registration covers the job.
CREATE FUNCTION pgwork_chaos.record() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pgwork_chaos AS $$
DECLARE
    expiry timestamptz := greatest(OLD.lease_expires_at,
                                   (SELECT w.expires_at FROM pgwork.worker_leases AS w
                                     WHERE w.owner = OLD.lease_owner AND OLD.worker_lease_token = OLD.lease_token));
BEGIN
    IF NEW.status = 'running' AND NEW.lease_token IS DISTINCT FROM OLD.lease_token THEN
        IF OLD.status = 'running' THEN
            -- Never expected: a claim taking a row another lease still held.
            INSERT INTO pgwork_chaos.events (job_id, kind, owner, token, attempt, new_status, lease_expires_at, writer)
            VALUES (OLD.id, 'end', OLD.lease_owner, OLD.lease_token, OLD.attempt_count, 'stolen',
                    expiry, current_setting('application_name'));
        END IF;
        INSERT INTO pgwork_chaos.events (job_id, kind, owner, token, attempt, new_status, lease_expires_at, writer)
        VALUES (NEW.id, 'claim', NEW.lease_owner, NEW.lease_token, NEW.attempt_count, NEW.status::text,
                NEW.lease_expires_at, current_setting('application_name'));
    ELSIF OLD.status = 'running' AND NEW.status <> 'running' THEN
        INSERT INTO pgwork_chaos.events (job_id, kind, owner, token, attempt, new_status, lease_expires_at, writer)
        VALUES (OLD.id, 'end', OLD.lease_owner, OLD.lease_token, OLD.attempt_count, NEW.status::text,
                expiry, current_setting('application_name'));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_chaos_log AFTER UPDATE ON pgwork.jobs
    FOR EACH ROW
    WHEN (OLD.status = 'running' OR NEW.status = 'running')
    EXECUTE FUNCTION pgwork_chaos.record();

-- name: record_fault
INSERT INTO pgwork_chaos.faults (kind, target, started_at, ended_at)
VALUES (%(kind)s, %(target)s, to_timestamp(%(started_at)s), to_timestamp(%(ended_at)s));

-- name: terminate_backends
-- Cut every connection of one worker process: its pool, heartbeat and LISTEN sessions.
SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid)) AS terminated
  FROM pg_stat_activity AS a
 WHERE a.application_name = %(app)s OR a.application_name LIKE %(app)s || '-%%';

-- name: unfinished
SELECT count(*) AS unfinished FROM pgwork.jobs WHERE status NOT IN ('succeeded', 'dead');

-- name: held_by
-- Jobs the worker holds whose work (the payload's `ms`) will still take a while: pausing it
-- now leaves a lease to be reclaimed while it sleeps.
SELECT count(*) AS held
  FROM pgwork.jobs AS j
 WHERE j.status = 'running' AND j.lease_owner = %(owner)s
   AND j.started_at + make_interval(secs => coalesce((j.payload ->> 'ms')::float8, 0) / 1000)
       > clock_timestamp() + interval '150 milliseconds';

-- name: after_promotion
-- The failover run: the first claim and the first finish the new primary saw after the promotion.
SELECT extract(epoch FROM min(j.started_at) FILTER (WHERE j.started_at > to_timestamp(%(at)s)) - to_timestamp(%(at)s))::float8
           AS first_claim,
       extract(epoch FROM min(j.completed_at) FILTER (WHERE j.completed_at > to_timestamp(%(at)s))
               - to_timestamp(%(at)s))::float8 AS first_finish,
       count(*) FILTER (WHERE j.status = 'succeeded' AND j.completed_at <= to_timestamp(%(at)s))::int AS finished_before
  FROM pgwork.jobs AS j;
