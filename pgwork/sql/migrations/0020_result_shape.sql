-- pgwork schema: a result the server stores is one every reader can decode.
--
-- job_results: two CHECK constraints, the rule pgwork.checkpoint keeps since migration 19 and the
-- client's (pgwork.validation.check_json): no container more than 100 levels down, no number whose
-- magnitude reaches 1e4300. pgwork's own writers never send either (the worker refuses such a
-- result and fails the attempt), but a role with the worker profile calling the succeed functions
-- directly could, and a producer's `wait` would then read back an undecodable marker instead of
-- its result. As constraints they hold for every writer (succeed, succeed_many, finish_then_claim
-- and any later version) without replacing a function. NOT VALID: rows already stored are not
-- rescanned (a large table would be locked for the scan); every new row is checked.

ALTER TABLE pgwork.job_results
    ADD CONSTRAINT job_results_result_depth_at_most_100 CHECK (
        NOT jsonb_path_exists(result, 'strict $.**{100} ? (@.type() == "object" || @.type() == "array")')
    ) NOT VALID,
    ADD CONSTRAINT job_results_result_numbers_under_4300_digits CHECK (
        NOT jsonb_path_exists(result, 'strict $.** ? (@.type() == "number" && (@ >= 1e4300 || @ <= -1e4300))')
    ) NOT VALID;
