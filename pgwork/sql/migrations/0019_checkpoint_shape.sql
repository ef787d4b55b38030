-- pgwork schema: a checkpoint the server stores is one the next attempt can decode.
--
-- checkpoint: replaces 0012's. It checked the size only, so a lease holder calling it directly
-- could store a checkpoint nested 5,000 levels deep, or a number of 5,000 digits, and the next
-- attempt received an undecodable marker as `last_checkpoint` (Python's decoder stops at its
-- recursion limit and at 4,300 digits). Now it also refuses what pgwork's client refuses (pgwork
-- .validation.MAX_JSON_DEPTH, and integers Python cannot read back): a container more than 100
-- levels down (jsonpath `.**{100}` reaches exactly that level, never deeper, so a deep document
-- costs no more than a flat one), and a number whose magnitude reaches 1e4300. Refusals are
-- SQLSTATE 22023 (invalid_parameter_value) naming `state`; the size check (54000) is unchanged
-- and still measures octet_length(state::text), which the client now measures the same way.

CREATE OR REPLACE FUNCTION pgwork.checkpoint(job_id bigint, token uuid, state jsonb, at timestamptz DEFAULT NULL)
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
    IF jsonb_path_exists(state, 'strict $.**{100} ? (@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION 'pgwork: state: a checkpoint is nested more than 100 levels deep'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'flatten it';
    END IF;
    IF jsonb_path_exists(state, 'strict $.** ? (@.type() == "number" && (@ >= 1e4300 || @ <= -1e4300))') THEN
        RAISE EXCEPTION 'pgwork: state: a checkpoint holds a number of 4300 digits or more'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'pass big numbers as strings';
    END IF;
    RETURN QUERY
    UPDATE pgwork.jobs AS j
       SET checkpoint = state, checkpoint_at = now_
     WHERE j.id = job_id AND j.lease_token = token AND j.status = 'running'
    RETURNING j.id, j.checkpoint_at;
END
$$;
