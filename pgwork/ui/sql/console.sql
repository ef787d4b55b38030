-- The console's statements (`pgwork ui`). Every read goes through pgwork's functions and views
-- (migration 17 and earlier), never a table: the console runs as the reader or maintainer profile,
-- which read no table, and a change of table layout changes the functions, not these.

-- name: may :one
-- What the connecting role may do: read payloads and results (the producer profile's
-- find_jobs_contents and job_contents), retry and cancel (the maintainer's), as the database
-- itself would decide.
SELECT has_function_privilege('pgwork.find_jobs_contents(text[], text[], text, timestamptz, timestamptz, text[], '
                              'text, bigint, integer, integer, integer, timestamptz)', 'EXECUTE')
           AND has_function_privilege('pgwork.job_contents(bigint)', 'EXECUTE') AS read_contents,
       has_function_privilege('pgwork.retry(bigint[], smallint, timestamptz)', 'EXECUTE')
           AND has_function_privilege('pgwork.cancel(bigint[], timestamptz)', 'EXECUTE')
           AND has_function_privilege('pgwork.record_console_action(text, text, text, integer, text)', 'EXECUTE')
           AS act,
       current_user AS role;

-- name: may_call :scalar
-- Whether the connecting role may read through one function (a page says so rather than failing).
SELECT has_function_privilege(%(function)s::text, 'EXECUTE');

-- name: find_jobs :many
-- A page of the jobs list, for any reader: no payload filter.
SELECT * FROM pgwork.find_jobs(%(job_types)s::text[], %(statuses)s::text[], %(error)s::text,
                               %(created_from)s::timestamptz, %(created_to)s::timestamptz, %(before)s::bigint,
                               %(scan)s::integer, %(lim)s::integer, %(error_chars)s::integer,
                               coalesce(%(now)s::timestamptz, now()));

-- name: find_jobs_contents :many
-- The same with the payload filter: producers and workers.
SELECT * FROM pgwork.find_jobs_contents(%(job_types)s::text[], %(statuses)s::text[], %(error)s::text,
                                        %(created_from)s::timestamptz, %(created_to)s::timestamptz,
                                        %(path)s::text[], %(value)s::text, %(before)s::bigint,
                                        %(scan)s::integer, %(lim)s::integer, %(error_chars)s::integer,
                                        coalesce(%(now)s::timestamptz, now()));

-- name: job_window :scalar
-- Where a page's window of jobs ended: the cursor for "search older".
SELECT pgwork.job_window(%(before)s::bigint, %(scan)s::integer);

-- name: dead_letters :many
SELECT * FROM pgwork.dead_letters(%(lim)s::integer, %(error_chars)s::integer);

-- name: finished_buckets :many
SELECT * FROM pgwork.finished_buckets(%(buckets)s::integer, %(bucket_seconds)s::float8, %(cap)s::integer,
                                      coalesce(%(now)s::timestamptz, now()));

-- name: record_action :scalar
-- In the action's own transaction: the change and its record commit together.
SELECT pgwork.record_console_action(%(actor)s::text, %(action)s::text, %(target)s::text, %(jobs)s::integer,
                                    %(outcome)s::text);

-- name: recent_actions :many
SELECT * FROM pgwork.console_actions_recent(%(lim)s::integer);
