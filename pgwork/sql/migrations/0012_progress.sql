-- pgwork schema, version 12: progress and checkpoints for long jobs.
--
-- A 40-minute OCR job used to be a black box (running, heartbeat fresh, nothing else) and, once
-- its worker crashed, started again from page 1. Here:
--   * progress (a fraction 0..1 and a short note) rides on the heartbeat the worker sends anyway:
--     pgwork.heartbeat takes, beside each lease, the new progress of the jobs that reported one
--     (NULL for the others), fenced by the same token, so progress costs no round trip. Values the
--     function cannot store are ignored, never raised: a bad value must not fail the renewal of
--     every lease the worker holds. progress_at is when the progress last changed (a job stuck
--     on one page shows a growing age while its heartbeat stays fresh);
--   * a checkpoint (small JSON) is written at once by pgwork.checkpoint, fenced by the token: it
--     exists for the crash that follows, so it may not wait for the next heartbeat;
--   * the claim returns the checkpoint to the next attempt (after a retry, a release or the
--     reaper's return) and clears the progress, which belongs to the attempt that reported it.
--     Nothing clears either when a job finishes: a succeeded job keeps its last progress and
--     checkpoint for inspection until retention prunes the row.
-- The new columns are in no index (version 4: renewals stay HOT), and running_jobs shows the
-- progress and the checkpoint's age but not its content: the reader profile sees no payload.

-- No default: adding the columns rewrites nothing. The checks are NOT VALID because every
-- existing row holds NULL (validating would scan the table under this migration's lock).
ALTER TABLE pgwork.jobs
    ADD COLUMN progress double precision,
    ADD COLUMN progress_note text,
    ADD COLUMN progress_at timestamptz,
    ADD COLUMN checkpoint jsonb,
    ADD COLUMN checkpoint_at timestamptz;
ALTER TABLE pgwork.jobs
    ADD CONSTRAINT jobs_progress_fraction CHECK (progress >= 0 AND progress <= 1) NOT VALID,
    ADD CONSTRAINT jobs_progress_note_length CHECK (length(progress_note) <= 200) NOT VALID;

-- heartbeat: as in version 2, plus progress. progress[i] and notes[i] go with job_ids[i]; a NULL
-- fraction (or an array shorter than job_ids, or NULL) leaves that job's progress as it was. A
-- fraction outside 0..1 (or NaN) is dropped and a note is cut to 200 characters, so nothing a
-- caller passes can make the renewal fail. A call with version 2's three arguments still renews.
SELECT pgwork.drop_profile_privilege(
    'worker', 'EXECUTE ON FUNCTION pgwork.heartbeat(bigint[], uuid[], double precision, timestamptz)');
DROP FUNCTION pgwork.heartbeat(bigint[], uuid[], double precision, timestamptz);
CREATE FUNCTION pgwork.heartbeat(
    job_ids bigint[], tokens uuid[], lease_seconds double precision, progress double precision[] DEFAULT NULL,
    notes text[] DEFAULT NULL, at timestamptz DEFAULT NULL
) RETURNS TABLE (id bigint, cancel_requested boolean, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
BEGIN
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET heartbeat_at = now_,
           lease_expires_at = now_ + make_interval(secs => lease_seconds),
           progress = coalesce(l.fraction, j.progress),
           progress_note = CASE WHEN l.fraction IS NULL THEN j.progress_note ELSE l.note END,
           progress_at = CASE WHEN l.fraction IS NULL
                                OR (l.fraction = j.progress AND l.note IS NOT DISTINCT FROM j.progress_note)
                              THEN j.progress_at ELSE now_ END
      FROM (SELECT u.id, u.token,
                   CASE WHEN u.fraction >= 0 AND u.fraction <= 1 THEN u.fraction END AS fraction,
                   left(u.note, 200) AS note
              FROM unnest(job_ids, tokens, heartbeat.progress, notes) AS u(id, token, fraction, note)
             WHERE u.id IS NOT NULL) AS l
     WHERE j.id = l.id AND j.lease_token = l.token AND j.status = 'running'
    RETURNING j.id, j.cancel_requested_at IS NOT NULL, j.lease_expires_at;
END
$$;
SELECT pgwork.add_profile_privilege(
    'worker',
    'EXECUTE ON FUNCTION pgwork.heartbeat(bigint[], uuid[], double precision, double precision[], text[], timestamptz)');

-- checkpoint: save the job's resumable state now, fenced by the token; one row back while the
-- token holds the job, none once it is lost. NULL clears it. The size is checked here too (the
-- client checks first, with the same limit), so no caller can park megabytes on a running row
-- that every later attempt reads back.
CREATE FUNCTION pgwork.checkpoint(job_id bigint, token uuid, state jsonb, at timestamptz DEFAULT NULL)
RETURNS TABLE (id bigint, checkpoint_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    size integer := octet_length(state::text);
BEGIN
    IF size > 65536 THEN
        RAISE EXCEPTION 'pgwork: a checkpoint holds at most 65536 bytes of JSON, this one is % bytes', size
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'save a position (a page number, a cursor), not the data; keep large state in your own storage';
    END IF;
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET checkpoint = state, checkpoint_at = now_
     WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
    RETURNING j.id, j.checkpoint_at;
END
$$;
SELECT pgwork.add_profile_privilege('worker', 'EXECUTE ON FUNCTION pgwork.checkpoint(bigint, uuid, jsonb, timestamptz)');

-- claim: version 11's (both arms), returning the checkpoint and clearing the progress. The return
-- type changes, so the function is dropped and created again (same arguments, same grant).
SELECT pgwork.drop_profile_privilege(
    'worker', 'EXECUTE ON FUNCTION pgwork.claim(text, text[], integer, double precision, timestamptz)');
DROP FUNCTION pgwork.claim(text, text[], integer, double precision, timestamptz);
CREATE FUNCTION pgwork.claim(
    owner text, job_types text[], max_jobs integer, lease_seconds double precision, at timestamptz DEFAULT NULL
) RETURNS TABLE (
    id bigint, job_type text, payload jsonb, priority smallint, attempt_count smallint, max_attempts smallint,
    idempotency_key text, trace_context jsonb, lease_owner text, lease_token uuid,
    lease_expires_at timestamptz, created_at timestamptz, last_error text, timeout_seconds double precision,
    checkpoint jsonb
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgwork, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    now_ timestamptz := CASE WHEN at IS NULL THEN now() ELSE pgwork.clock(at) END;
    chosen bigint[];
BEGIN
    IF EXISTS (SELECT 1 FROM pgwork.job_limits AS l WHERE job_types IS NULL OR l.job_type = ANY (job_types)) THEN
        chosen := pgwork.claim_limited(job_types, max_jobs, now_);
        RETURN QUERY
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
         WHERE j.id = ANY (chosen)
        RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
                  j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
                  j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
        RETURN;
    END IF;
    RETURN QUERY
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
     WHERE j.id = ANY (ARRAY(
            SELECT k.id
              FROM (SELECT a.id, a.priority, a.available_at
                      FROM (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                             WHERE job_types IS NULL
                               AND c.status = 'pending'
                               AND c.available_at <= now_
                             ORDER BY c.priority, c.available_at, c.id
                             LIMIT max_jobs
                               FOR UPDATE SKIP LOCKED) AS a
                    UNION ALL
                    SELECT t.id, t.priority, t.available_at
                      FROM (SELECT DISTINCT u.name FROM unnest(job_types) AS u(name)) AS w,
                           LATERAL (SELECT c.id, c.priority, c.available_at FROM pgwork.jobs AS c
                                     WHERE c.status = 'pending'
                                       AND c.job_type = w.name
                                       AND c.available_at <= now_
                                     ORDER BY c.priority, c.available_at, c.id
                                     LIMIT max_jobs
                                       FOR UPDATE SKIP LOCKED) AS t) AS k
             ORDER BY k.priority, k.available_at, k.id
             LIMIT max_jobs))
    RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.idempotency_key, j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at,
              j.created_at, j.last_error, j.timeout_seconds, j.checkpoint;
END
$$;
SELECT pgwork.add_profile_privilege(
    'worker', 'EXECUTE ON FUNCTION pgwork.claim(text, text[], integer, double precision, timestamptz)');

-- running_jobs (the pgwork.running view, `pgwork running`): version 1's columns, then the
-- progress, how long ago it last changed and how long ago the last checkpoint was saved (NULL:
-- none yet). Its columns change, so it and its view are dropped and created again.
SELECT pgwork.drop_profile_privilege('reader', 'SELECT ON pgwork.running');
SELECT pgwork.drop_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.running_jobs(timestamptz)');
DROP VIEW pgwork.running;
DROP FUNCTION pgwork.running_jobs(timestamptz);
CREATE FUNCTION pgwork.running_jobs(at timestamptz DEFAULT now())
RETURNS TABLE (
    id bigint, job_type text, lease_owner text, attempt_count smallint, max_attempts smallint,
    started_at timestamptz, lease_remaining_seconds double precision,
    since_heartbeat_seconds double precision, cancel_requested boolean,
    progress double precision, progress_note text, since_progress_seconds double precision,
    since_checkpoint_seconds double precision
) LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgwork, pg_temp AS $$
    SELECT j.id, j.job_type, j.lease_owner, j.attempt_count, j.max_attempts, j.started_at,
           extract(epoch FROM j.lease_expires_at - at)::double precision,
           extract(epoch FROM at - j.heartbeat_at)::double precision,
           j.cancel_requested_at IS NOT NULL,
           j.progress, j.progress_note,
           extract(epoch FROM at - j.progress_at)::double precision,
           extract(epoch FROM at - j.checkpoint_at)::double precision
      FROM pgwork.jobs AS j
     WHERE j.status = 'running'
     ORDER BY j.lease_expires_at
$$;
CREATE VIEW pgwork.running AS SELECT * FROM pgwork.running_jobs();
SELECT pgwork.add_profile_privilege('reader', 'EXECUTE ON FUNCTION pgwork.running_jobs(timestamptz)');
SELECT pgwork.add_profile_privilege('reader', 'SELECT ON pgwork.running');

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork FROM PUBLIC;
