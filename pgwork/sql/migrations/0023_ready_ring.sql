-- pgwork schema: the claim reads a ring of truncatable segments, so a held vacuum horizon cannot
-- make it walk an unbounded head of dead index entries (issue 23). Replaces pgwork.claim (0011,
-- limited branch since 0018) and pgwork.claim_limited (0018); adds pgwork.ready, its trigger and
-- pgwork.rotate_ready. pgwork.jobs stays the row store: every other function, view, index and
-- fence is unchanged, and jobs_claim_idx / jobs_claim_type_idx are kept (no claim reads them any
-- more; dropping them needs DROP INDEX CONCURRENTLY outside a transaction, which the migrator
-- cannot do yet).
--
-- pgwork.ready holds one row per pending job: (segment, job_id, job_type, priority, available_at),
-- LIST-partitioned by segment into 8 tables ready_0..ready_7. The segment a row goes to is the
-- time it became pending: floor(epoch / 10 s) mod 8 (pgwork.ready_segment). A claim deletes the
-- ready rows it takes; under a held horizon their dead index entries stay in that segment only.
-- pgwork.rotate_ready moves the few live rows of an older segment to the current one and
-- TRUNCATEs it: TRUNCATE needs only an ACCESS EXCLUSIVE lock on that one partition, so it removes
-- the dead entries whatever snapshot is open elsewhere, where VACUUM cannot. A claim therefore
-- walks at most the churn of about two segment periods, not everything since the oldest snapshot.
--
-- Consistency: triggers on pgwork.jobs keep ready = the pending jobs. An insert (enqueue, COPY,
-- schedules) adds the pending rows (one statement for a batch); an update that makes a row pending
-- (retry, backoff, reaper return, release) adds one; an update that takes a row out of pending
-- other than the claim (cancel) deletes it; a delete or TRUNCATE of jobs does the same. The
-- claim's own pending -> running is excluded by the WHEN clause, so the claim pays no trigger.
-- A ready row whose job is no longer pending (a writer that bypassed the functions) is deleted by
-- the claim that finds it; a pending job without a ready row cannot arise from these triggers.
--
-- Migrating a live queue: everything above is created first (new objects, no lock on jobs);
-- the trigger is created last and takes SHARE ROW EXCLUSIVE on pgwork.jobs, which blocks its
-- writers (not its readers) until this transaction commits, so the copy of the pending jobs into
-- ready that follows sees every pending job and no writer can slip between the copy and the
-- trigger. That lock lasts as long as the copy (measured in docs/architecture.md).

CREATE TABLE pgwork.ready (
    segment smallint NOT NULL,
    job_id bigint NOT NULL,
    job_type text NOT NULL,
    priority smallint NOT NULL,
    available_at timestamptz NOT NULL
) PARTITION BY LIST (segment);

DO $$
BEGIN
    FOR s IN 0..7 LOOP
        EXECUTE format('CREATE TABLE pgwork.%I PARTITION OF pgwork.ready FOR VALUES IN (%s)', 'ready_' || s, s);
    END LOOP;
END
$$;

-- The claim's two orders, as jobs_claim_idx and jobs_claim_type_idx had them, and the lookup by
-- job a cancel (and the claim's delete) uses.
CREATE INDEX ready_claim_idx ON pgwork.ready (priority, available_at, job_id);
CREATE INDEX ready_claim_type_idx ON pgwork.ready (job_type, priority, available_at, job_id);
CREATE INDEX ready_job_idx ON pgwork.ready (job_id);
REVOKE ALL ON pgwork.ready FROM PUBLIC;

-- The segment a row becoming pending at `at` goes to: 10-second periods in a ring of 8.
CREATE FUNCTION pgwork.ready_segment(at timestamptz) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT (floor(extract(epoch FROM at) / 10)::bigint % 8)::smallint
$$;

CREATE FUNCTION pgwork.ready_enqueued() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
BEGIN
    INSERT INTO pgwork.ready (segment, job_id, job_type, priority, available_at)
    SELECT pgwork.ready_segment(now()), n.id, n.job_type, n.priority, n.available_at
      FROM new_jobs AS n
     WHERE n.status = 'pending';
    RETURN NULL;
END
$$;

CREATE FUNCTION pgwork.ready_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'pending' THEN
        DELETE FROM pgwork.ready AS r WHERE r.job_id = OLD.id;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status = 'pending' THEN
        INSERT INTO pgwork.ready (segment, job_id, job_type, priority, available_at)
        VALUES (pgwork.ready_segment(now()), NEW.id, NEW.job_type, NEW.priority, NEW.available_at);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION pgwork.ready_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
BEGIN
    TRUNCATE pgwork.ready;
    RETURN NULL;
END
$$;

-- The claim: pick ready rows in (priority, available_at, id) order, skipping locked ones, lock
-- their jobs rows (skipping those another session holds: a cancel in flight), delete the ready
-- rows taken or found stale, and mark the jobs running: one statement, as before.
CREATE OR REPLACE FUNCTION pgwork.claim(
    owner text, job_types text[], max_jobs integer, lease_seconds double precision, at timestamptz DEFAULT NULL
) RETURNS TABLE (id bigint, job_type text, payload jsonb, priority smallint, attempt_count smallint,
                 max_attempts smallint, idempotency_key text, trace_context jsonb, lease_owner text,
                 lease_token uuid, lease_expires_at timestamptz, created_at timestamptz, last_error text,
                 timeout_seconds double precision, checkpoint jsonb)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp SET plan_cache_mode = force_generic_plan
-- A segment's statistics are stale by design (it fills for 10 s, then is truncated): a generic plan
-- made while one looked empty must still read it by index, never scan and sort it.
SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    chosen bigint[];
BEGIN
    IF EXISTS (SELECT 1 FROM pgwork.job_limits AS l WHERE job_types IS NULL OR l.job_type = ANY (job_types)) THEN
        -- claim_limited locked the ready rows it chose; the same steps as below, by job id.
        chosen := pgwork.claim_limited(job_types, max_jobs, now_);
        RETURN QUERY
        WITH held AS MATERIALIZED (
            SELECT h.id FROM pgwork.jobs AS h
             WHERE h.id = ANY (chosen) AND h.status::text = 'pending'
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM pgwork.ready AS r
             WHERE r.job_id = ANY (ARRAY(
                    SELECT c.id FROM unnest(chosen) AS c(id)
                     WHERE c.id IN (SELECT x.id FROM held AS x)
                        OR (SELECT y.status FROM pgwork.jobs AS y WHERE y.id = c.id) IS DISTINCT FROM 'pending'))
        )
        UPDATE pgwork.jobs AS j
           SET status = 'running',
               started_at = now_,
               attempt_count = j.attempt_count + 1,
               lease_owner = owner,
               lease_token = gen_random_uuid(),
               lease_expires_at = now_ + make_interval(secs => lease_seconds),
               heartbeat_at = now_,
               cancel_requested_at = NULL,
               progress = NULL,
               progress_note = NULL,
               progress_at = NULL
         WHERE j.id = ANY (ARRAY(SELECT h.id FROM held AS h))
        RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
                  j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
                  j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
        RETURN;
    END IF;
    RETURN QUERY
    WITH picked AS MATERIALIZED (
        SELECT k.part, k.row_at, k.job_id
          FROM (SELECT a.part, a.row_at, a.job_id, a.priority, a.available_at
                  FROM (SELECT c.tableoid AS part, c.ctid AS row_at, c.job_id, c.priority, c.available_at FROM pgwork.ready AS c
                         WHERE job_types IS NULL
                           AND c.available_at <= now_
                         ORDER BY c.priority, c.available_at, c.job_id
                         LIMIT max_jobs
                           FOR UPDATE SKIP LOCKED) AS a
                UNION ALL
                SELECT t.part, t.row_at, t.job_id, t.priority, t.available_at
                  FROM (SELECT DISTINCT u.name FROM unnest(job_types) AS u(name)) AS w,
                       LATERAL (SELECT c.tableoid AS part, c.ctid AS row_at, c.job_id, c.priority, c.available_at FROM pgwork.ready AS c
                                 WHERE c.job_type = w.name
                                   AND c.available_at <= now_
                                 ORDER BY c.priority, c.available_at, c.job_id
                                 LIMIT max_jobs
                                   FOR UPDATE SKIP LOCKED) AS t) AS k
         ORDER BY k.priority, k.available_at, k.job_id
         LIMIT max_jobs
    ), held AS MATERIALIZED (
        -- The picked jobs' rows, locked if still pending; a row another session holds (a cancel
        -- in flight) is skipped, as the claim always did. `status::text`, not `status`: a generic
        -- plan must find these few rows by primary key, never by a pending-only partial index.
        SELECT x.id FROM pgwork.jobs AS x
         WHERE x.id = ANY (ARRAY(SELECT p.job_id FROM picked AS p))
           AND x.status::text = 'pending'
           FOR UPDATE SKIP LOCKED
    ), gone AS (
        -- The ready rows taken, and those whose job is not pending (stale); a row whose job
        -- another session holds stays, for that session's trigger to settle.
        -- By the rows' own addresses (locked above, so they stay put): a TID scan, whatever the
        -- statistics, and no page read in a truncated segment.
        DELETE FROM pgwork.ready AS r
         WHERE r.ctid = ANY (ARRAY(SELECT p.row_at FROM picked AS p))
           AND (r.tableoid, r.ctid) IN (
                SELECT p.part, p.row_at FROM picked AS p
                 WHERE p.job_id IN (SELECT h.id FROM held AS h)
                    OR (SELECT y.status FROM pgwork.jobs AS y WHERE y.id = p.job_id) IS DISTINCT FROM 'pending')
    )
    UPDATE pgwork.jobs AS j
       SET status = 'running',
           started_at = now_,
           attempt_count = j.attempt_count + 1,
           lease_owner = owner,
           lease_token = gen_random_uuid(),
           lease_expires_at = now_ + make_interval(secs => lease_seconds),
           heartbeat_at = now_,
           cancel_requested_at = NULL,
           progress = NULL,
           progress_note = NULL,
           progress_at = NULL
     WHERE j.id = ANY (ARRAY(SELECT h.id FROM held AS h))
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
END
$$;

-- As 0018's, reading pgwork.ready instead of the jobs' claim indexes: the types with a ready row,
-- and the limited types' rows locked FOR UPDATE SKIP LOCKED in ready. Returns the job ids.
CREATE OR REPLACE FUNCTION pgwork.claim_limited(job_types text[], max_jobs integer, now_ timestamptz)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp
SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    wanted text[];
    chosen bigint[];
    skipped text[] := '{}';
    limited text;
    saved_timeout text;
    -- Long enough for a claim's own lock (held for the claim's milliseconds) to be waited for.
    lock_wait constant text := '5ms';
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgwork: a claim that may take a limited job type must run at READ COMMITTED, not %',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'claim in a transaction of its own (Queue.claim without conn) or SET TRANSACTION ISOLATION LEVEL READ COMMITTED';
    END IF;
    IF job_types IS NULL THEN
        -- Any type: the types with a ready row, skipping from one to the next on
        -- ready_claim_type_idx (a few buffers per type and segment).
        wanted := ARRAY(
            WITH RECURSIVE t(name) AS (
                SELECT min(c.job_type) FROM pgwork.ready AS c
                UNION ALL
                SELECT (SELECT min(c.job_type) FROM pgwork.ready AS c WHERE c.job_type > t.name)
                  FROM t WHERE t.name IS NOT NULL
            )
            SELECT t.name FROM t WHERE t.name IS NOT NULL);
    ELSE
        wanted := ARRAY(SELECT DISTINCT u.name FROM unnest(job_types) AS u(name) WHERE u.name IS NOT NULL);
    END IF;

    -- 1. The limited types' rows, locked in type order, each waited for at most lock_wait (0018).
    saved_timeout := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', lock_wait, true);
    FOR limited IN SELECT l.job_type FROM pgwork.job_limits AS l WHERE l.job_type = ANY (wanted) ORDER BY l.job_type
    LOOP
        BEGIN
            PERFORM 1 FROM pgwork.job_limits AS l WHERE l.job_type = limited FOR UPDATE;
        EXCEPTION WHEN lock_not_available OR query_canceled THEN
            -- query_canceled too: a lock timeout firing as the lock is granted can surface as a
            -- cancel (0018); either way the row was not had in time.
            skipped := skipped || limited;
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', saved_timeout, true);
    IF skipped <> '{}' THEN
        wanted := ARRAY(SELECT w.name FROM unnest(wanted) AS w(name) WHERE w.name <> ALL (skipped));
        FOREACH limited IN ARRAY skipped LOOP
            RAISE NOTICE USING MESSAGE = 'pgwork: claim skipped a limited job type locked by another session',
                               DETAIL = limited, ERRCODE = 'PW001';
        END LOOP;
    END IF;

    -- 2. A new statement, so a snapshot taken after the locks: counts include every claim before.
    WITH lim AS (
        SELECT l.job_type,
               CASE WHEN l.rate_count IS NOT NULL THEN
                   least(l.rate_count::double precision,
                         l.tokens + greatest(extract(epoch FROM now_ - l.refilled_at), 0) * l.rate_count / l.rate_seconds)
               END AS tokens,
               l.max_running - (SELECT count(*) FROM pgwork.jobs AS r
                                 WHERE r.status = 'running' AND r.job_type = l.job_type) AS free
          FROM pgwork.job_limits AS l
         WHERE l.job_type = ANY (wanted)
    ), allowed AS (
        SELECT w.name,
               greatest(0, least(max_jobs, coalesce(m.free, max_jobs), coalesce(floor(m.tokens), max_jobs)))::integer AS n
          FROM unnest(wanted) AS w(name) LEFT JOIN lim AS m ON m.job_type = w.name
    ), picked AS (
        SELECT k.job_id, k.job_type
          FROM (SELECT t.job_id, t.job_type, t.priority, t.available_at
                  FROM allowed AS a,
                       LATERAL (SELECT c.job_id, c.job_type, c.priority, c.available_at FROM pgwork.ready AS c
                                 WHERE c.job_type = a.name
                                   AND c.available_at <= now_
                                 ORDER BY c.priority, c.available_at, c.job_id
                                 LIMIT a.n
                                   FOR UPDATE SKIP LOCKED) AS t) AS k
         ORDER BY k.priority, k.available_at, k.job_id
         LIMIT max_jobs
    ), spent AS (
        UPDATE pgwork.job_limits AS l
           SET tokens = greatest(m.tokens - (SELECT count(*) FROM picked AS p WHERE p.job_type = l.job_type), 0),
               refilled_at = greatest(l.refilled_at, now_)
          FROM lim AS m
         WHERE l.job_type = m.job_type AND m.tokens IS NOT NULL
    )
    SELECT array_agg(p.job_id) INTO chosen FROM picked AS p;
    RETURN coalesce(chosen, ARRAY[]::bigint[]);
END
$$;

-- Truncates the segments other than the current one that hold rows or dead entries, after moving
-- their live rows (jobs still pending: future-dated, backoff, or a backlog) to the current
-- segment. One caller at a time (a transaction-scoped advisory lock; a second caller returns at
-- once). Each segment's lock is waited for at most 20 ms: a claim holds it for its milliseconds,
-- a session that read ready inside a long transaction for as long as that lasts; such a segment
-- is skipped (outcome 'busy') rather than queueing every claim behind a waiting TRUNCATE. A
-- segment with more than move_limit live rows is left ('full'), so one call never holds claims
-- back for long; it is truncated once the backlog in it drains. Returns what it did per segment.
-- Callers: workers (every few seconds) and the reaper; profile 'worker' and 'reaper'.
CREATE FUNCTION pgwork.rotate_ready(at timestamptz DEFAULT NULL, move_limit integer DEFAULT 10000)
RETURNS TABLE (segment smallint, outcome text, moved integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    current_ smallint := pgwork.ready_segment(now_);
    part regclass;
    live integer;
    saved_timeout text;
BEGIN
    -- 'pgwork.ready' as a 64-bit key: one rotation at a time, never a leader.
    IF NOT pg_try_advisory_xact_lock(hashtextextended('pgwork.rotate_ready', 0)) THEN
        RETURN;
    END IF;
    saved_timeout := current_setting('lock_timeout');
    FOR s IN 0..7 LOOP
        CONTINUE WHEN s = current_;
        part := format('pgwork.%I', 'ready_' || s)::regclass;
        -- A truncated segment no one wrote to since has no heap pages: nothing to do.
        CONTINUE WHEN pg_relation_size(part) = 0;
        PERFORM set_config('lock_timeout', '20ms', true);
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', part);
        EXCEPTION WHEN lock_not_available OR query_canceled THEN
            PERFORM set_config('lock_timeout', saved_timeout, true);
            segment := s; outcome := 'busy'; moved := 0;
            RETURN NEXT;
            CONTINUE;
        END;
        PERFORM set_config('lock_timeout', saved_timeout, true);
        -- Under the lock no claim, enqueue or cancel touches this segment until commit.
        EXECUTE format('SELECT count(*) FROM %s AS r JOIN pgwork.jobs AS j ON j.id = r.job_id AND j.status = ''pending''', part)
           INTO live;
        IF live > move_limit THEN
            segment := s; outcome := 'full'; moved := live;
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- Live rows to the current segment; rows whose job is not pending (stale) are dropped.
        EXECUTE format(
            'INSERT INTO pgwork.ready (segment, job_id, job_type, priority, available_at)
             SELECT $1, r.job_id, r.job_type, r.priority, r.available_at
               FROM %s AS r JOIN pgwork.jobs AS j ON j.id = r.job_id AND j.status = ''pending''', part)
          USING current_;
        EXECUTE format('TRUNCATE %s', part);
        segment := s; outcome := 'truncated'; moved := live;
        RETURN NEXT;
    END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION pgwork.rotate_ready(timestamptz, integer) FROM PUBLIC;
SELECT pgwork.add_profile_privilege('worker', 'EXECUTE ON FUNCTION pgwork.rotate_ready(timestamptz, integer)');
SELECT pgwork.add_profile_privilege('reaper', 'EXECUTE ON FUNCTION pgwork.rotate_ready(timestamptz, integer)');
REVOKE EXECUTE ON FUNCTION pgwork.ready_enqueued(), pgwork.ready_changed(), pgwork.ready_truncated(),
    pgwork.ready_segment(timestamptz) FROM PUBLIC;

-- Last: the triggers (SHARE ROW EXCLUSIVE on pgwork.jobs until commit: writers wait, readers do
-- not), then the copy of the pending jobs, which no writer can change in between.
CREATE TRIGGER jobs_ready_enqueued AFTER INSERT ON pgwork.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION pgwork.ready_enqueued();
CREATE TRIGGER jobs_ready_changed AFTER UPDATE OF status, priority, available_at, job_type ON pgwork.jobs
    FOR EACH ROW
    WHEN ((NEW.status = 'pending'
           AND (OLD.status <> 'pending' OR OLD.priority <> NEW.priority
                OR OLD.available_at <> NEW.available_at OR OLD.job_type <> NEW.job_type))
          OR (OLD.status = 'pending' AND NEW.status <> ALL (ARRAY['pending', 'running']::pgwork.job_status[])))
    EXECUTE FUNCTION pgwork.ready_changed();
CREATE TRIGGER jobs_ready_deleted AFTER DELETE ON pgwork.jobs
    FOR EACH ROW WHEN (OLD.status = 'pending')
    EXECUTE FUNCTION pgwork.ready_changed();
CREATE TRIGGER jobs_ready_truncated AFTER TRUNCATE ON pgwork.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION pgwork.ready_truncated();

LOCK TABLE pgwork.jobs IN SHARE MODE;
INSERT INTO pgwork.ready (segment, job_id, job_type, priority, available_at)
SELECT pgwork.ready_segment(now()), j.id, j.job_type, j.priority, j.available_at
  FROM pgwork.jobs AS j
 WHERE j.status = 'pending';
