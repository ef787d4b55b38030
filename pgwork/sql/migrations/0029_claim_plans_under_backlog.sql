-- pgwork schema: one type's backlog no longer costs the claim of another, nor its own (issue 28).
-- every function in schema pgwork: SET jit = off; the ready ring's segments: job_type's n_distinct.
--
-- Two plans went wrong under a backlog (PostgreSQL 15, measured with scripts/jit_backlog.py and
-- docs/benchmarks.md section 20). Both come from the claim's generic plan
-- (plan_cache_mode = force_generic_plan), which is made from the statistics without knowing
-- which type is asked for or how many jobs.
--
-- 1. The wrong index. Once ANALYZE (autovacuum's or anyone's) had seen a ring segment holding
--    one job type, or one type and a few others, `job_type = <the type asked for>` looked as if
--    it kept every row, and the planner read that segment through its any-type index
--    (priority, available_at, job_id), filtering on the type, instead of the index that leads
--    with the type. A claim of any other type then read the whole segment to find its jobs:
--    300,000 rows and 35-60 ms a claim, where 0.5 ms was the norm. Each segment now tells the
--    planner that a type is rare (n_distinct = -1: one type's share of a segment is never known
--    in advance, and a claim names the type it wants). The planner then reaches a type by its
--    own index whatever the statistics, and its estimates no longer grow with the backlog.
--    ANALYZE writes the override into the statistics, so the segments are analyzed here.
--
-- 2. JIT. On a server built with LLVM (pg_jit_available(); most packaged servers are), a
--    statement whose estimate passes jit_above_cost (100,000 by default) is compiled before it
--    runs. The estimate of the any-type claim still grows with the ring's rows (its LIMIT is a
--    parameter, assumed to keep a tenth of them): at 600,000 pending jobs each claim spent
--    45-75 ms compiling (129 functions) what runs in under a millisecond, and past 500,000 the
--    compiler also optimizes and inlines. pgwork's statements are short and bounded and none
--    gains from compiling, so every function switches JIT off for its own statements, whatever
--    the server or the session sets. The setting holds only inside each call.
--
-- CREATE OR REPLACE FUNCTION replaces a function's SET clauses with its own, so every later
-- migration that replaces or adds a function writes `SET jit = off` beside its search_path, and
-- one that adds a ring segment sets its n_distinct (tests/core/test_grants.py and
-- tests/core/test_backlog_plans.py check both).

DO $$
DECLARE
    f regprocedure;
    segment regclass;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc AS p
         WHERE p.pronamespace = 'pgwork'::regnamespace AND p.prokind IN ('f', 'p')
         ORDER BY p.oid
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET jit = off', f);
    END LOOP;
    -- Segments only: the planner reads each segment's own statistics for the claim's scans.
    FOR segment IN
        SELECT i.inhrelid::regclass FROM pg_catalog.pg_inherits AS i
         WHERE i.inhparent = 'pgwork.ready'::regclass
         ORDER BY i.inhrelid
    LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN job_type SET (n_distinct = -1)', segment);
    END LOOP;
END
$$;

ANALYZE pgwork.ready;
