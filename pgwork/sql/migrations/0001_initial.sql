-- pgwork schema, version 1.
-- Everything lives in the `pgwork` schema so it never collides with the business tables
-- of the database it shares, and so roles can be granted per schema.

CREATE TYPE pgwork.job_status AS ENUM ('pending', 'running', 'succeeded', 'dead', 'cancelled');

CREATE TABLE pgwork.jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_type            text              NOT NULL,
    payload             jsonb             NOT NULL DEFAULT '{}'::jsonb,
    status              pgwork.job_status NOT NULL DEFAULT 'pending',
    -- Lower runs first, as in the lab.
    priority            smallint          NOT NULL DEFAULT 100,
    attempt_count       smallint          NOT NULL DEFAULT 0,
    max_attempts        smallint          NOT NULL DEFAULT 5,
    created_at          timestamptz       NOT NULL DEFAULT now(),
    available_at        timestamptz       NOT NULL DEFAULT now(),
    started_at          timestamptz,
    completed_at        timestamptz,
    -- The lease: who holds the job, a token minted per claim (a pod restarted under the same
    -- name is a new owner), and when the hold lapses unless renewed.
    lease_owner         text,
    lease_token         uuid,
    lease_expires_at    timestamptz,
    heartbeat_at        timestamptz,
    cancel_requested_at timestamptz,
    last_error          text,
    -- Derived from the work when the producer gives none, so two runs of the same work
    -- produce the same key and the effect is written once.
    idempotency_key     text              NOT NULL,
    trace_context       jsonb             NOT NULL DEFAULT '{}'::jsonb,

    CONSTRAINT jobs_running_leased CHECK (
        status <> 'running'
        OR (lease_owner IS NOT NULL AND lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
    ),
    CONSTRAINT jobs_job_type_shape CHECK (length(job_type) BETWEEN 1 AND 200),
    CONSTRAINT jobs_key_shape CHECK (length(idempotency_key) BETWEEN 1 AND 500),
    CONSTRAINT jobs_priority_range CHECK (priority >= 0),
    CONSTRAINT jobs_attempts_sane CHECK (attempt_count >= 0 AND max_attempts >= 1),
    CONSTRAINT jobs_payload_object CHECK (jsonb_typeof(payload) = 'object'),
    CONSTRAINT jobs_finished_dated CHECK (
        status NOT IN ('succeeded', 'dead', 'cancelled') OR completed_at IS NOT NULL
    )
);

-- Queue tables churn: leave room on each page so status flips can stay on the page,
-- and vacuum after a small fraction of the table changed rather than the default 20%.
ALTER TABLE pgwork.jobs SET (
    fillfactor = 85,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);

-- The claim index: only the backlog, in the claim's ORDER BY, so history is invisible to it.
CREATE INDEX jobs_claim_idx ON pgwork.jobs (priority, available_at, id) WHERE status = 'pending';
-- The reaper's index: one entry per job in flight, bounded by the number of workers.
CREATE INDEX jobs_lease_idx ON pgwork.jobs (lease_expires_at) WHERE status = 'running';
-- Small indexes for the operator's questions.
CREATE INDEX jobs_dead_idx ON pgwork.jobs (completed_at) WHERE status = 'dead';
CREATE INDEX jobs_retrying_idx ON pgwork.jobs (attempt_count) WHERE status = 'pending' AND attempt_count > 0;
-- Retention deletes by age; this one grows with history by design and is only read by prune.
CREATE INDEX jobs_finished_idx ON pgwork.jobs (completed_at) WHERE status IN ('succeeded', 'cancelled');

CREATE TABLE pgwork.job_results (
    idempotency_key text        PRIMARY KEY,
    -- No foreign key: results are the business effect and outlive the job rows that
    -- retention prunes; job_id stays as provenance.
    job_id          bigint      NOT NULL,
    job_type        text        NOT NULL,
    produced_by     text        NOT NULL,
    produced_at     timestamptz NOT NULL DEFAULT now(),
    result          jsonb       NOT NULL
);
CREATE INDEX job_results_job_idx ON pgwork.job_results (job_id);

-- Wake idle workers whoever inserts: pgwork's enqueue or another service's plain INSERT.
-- One notification per distinct job type per statement; delivered at commit.
CREATE FUNCTION pgwork.notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgwork_jobs', t.job_type)
       FROM (SELECT DISTINCT job_type FROM new_jobs WHERE status = 'pending') AS t;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_notify AFTER INSERT ON pgwork.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION pgwork.notify_jobs();

-- The lab's four operator questions, as functions taking `at` (so tests need not sleep)
-- and as views over them for people at a psql prompt.
CREATE FUNCTION pgwork.queue_stats(job_types text[] DEFAULT NULL, at timestamptz DEFAULT now())
RETURNS TABLE (
    job_type text, ready bigint, scheduled bigint, retrying bigint, running bigint, dead bigint,
    oldest_wait_seconds double precision, max_heartbeat_age_seconds double precision
) LANGUAGE sql STABLE AS $$
    -- One arm per status so each reads its own partial index: the cost follows the
    -- backlog, never the history.
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
           count(*) FILTER (WHERE l.status = 'pending' AND l.available_at <= at),
           count(*) FILTER (WHERE l.status = 'pending' AND l.available_at > at),
           count(*) FILTER (WHERE l.status = 'pending' AND l.attempt_count > 0),
           count(*) FILTER (WHERE l.status = 'running'),
           count(*) FILTER (WHERE l.status = 'dead'),
           coalesce(extract(epoch FROM max(at - l.created_at)
                    FILTER (WHERE l.status = 'pending' AND l.available_at <= at)), 0)::double precision,
           coalesce(extract(epoch FROM max(at - l.heartbeat_at)
                    FILTER (WHERE l.status = 'running')), 0)::double precision
      FROM live AS l
     WHERE queue_stats.job_types IS NULL OR l.job_type = ANY (queue_stats.job_types)
     GROUP BY l.job_type
     ORDER BY l.job_type
$$;

CREATE FUNCTION pgwork.running_jobs(at timestamptz DEFAULT now())
RETURNS TABLE (
    id bigint, job_type text, lease_owner text, attempt_count smallint, max_attempts smallint,
    started_at timestamptz, lease_remaining_seconds double precision,
    since_heartbeat_seconds double precision, cancel_requested boolean
) LANGUAGE sql STABLE AS $$
    SELECT j.id, j.job_type, j.lease_owner, j.attempt_count, j.max_attempts, j.started_at,
           extract(epoch FROM j.lease_expires_at - at)::double precision,
           extract(epoch FROM at - j.heartbeat_at)::double precision,
           j.cancel_requested_at IS NOT NULL
      FROM pgwork.jobs AS j
     WHERE j.status = 'running'
     ORDER BY j.lease_expires_at
$$;

CREATE FUNCTION pgwork.retrying_jobs(at timestamptz DEFAULT now())
RETURNS TABLE (
    id bigint, job_type text, attempt_count smallint, max_attempts smallint,
    retry_in_seconds double precision, last_error text
) LANGUAGE sql STABLE AS $$
    SELECT j.id, j.job_type, j.attempt_count, j.max_attempts,
           greatest(extract(epoch FROM j.available_at - at), 0)::double precision,
           j.last_error
      FROM pgwork.jobs AS j
     WHERE j.status = 'pending' AND j.attempt_count > 0
     ORDER BY j.attempt_count DESC, j.id
$$;

CREATE FUNCTION pgwork.dead_jobs()
RETURNS TABLE (
    id bigint, job_type text, attempt_count smallint, max_attempts smallint,
    completed_at timestamptz, last_error text
) LANGUAGE sql STABLE AS $$
    SELECT j.id, j.job_type, j.attempt_count, j.max_attempts, j.completed_at, j.last_error
      FROM pgwork.jobs AS j
     WHERE j.status = 'dead'
     ORDER BY j.completed_at DESC, j.id DESC
$$;

CREATE VIEW pgwork.stats AS SELECT * FROM pgwork.queue_stats();
CREATE VIEW pgwork.running AS SELECT * FROM pgwork.running_jobs();
CREATE VIEW pgwork.retrying AS SELECT * FROM pgwork.retrying_jobs();
CREATE VIEW pgwork.dead AS SELECT * FROM pgwork.dead_jobs();
