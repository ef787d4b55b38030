-- pgwork: no-transaction
-- pgwork schema, version 24: drops jobs_claim_idx (0001) and jobs_claim_type_idx (0007). Since
-- version 23 the claim reads the ready ring (pgwork.ready) and no claim, view or function reads
-- these two; every insert and every status change still paid to maintain them. Dropped
-- CONCURRENTLY, outside a transaction (the first line): the drop waits for the transactions that
-- use pgwork.jobs to end without taking a lock writers queue behind (measured with 1M pending and a
-- report open 2 s: writers' longest statement 11 ms, a plain DROP INDEX 2 s; docs/benchmarks.md
-- section 18). Rerun after an interruption, it finishes the drop (an interrupted DROP INDEX
-- CONCURRENTLY leaves the index invalid, not half gone).
DROP INDEX CONCURRENTLY IF EXISTS pgwork.jobs_claim_idx;
DROP INDEX CONCURRENTLY IF EXISTS pgwork.jobs_claim_type_idx;
