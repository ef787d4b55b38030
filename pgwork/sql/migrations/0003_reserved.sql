-- pgwork schema, version 3: reserved. Branch `isolation` writes the real 0003 (the claim index
-- leading with the job type, bounded stats) at the same time as 0004 was written; this file only
-- keeps the versions gapless on the branch that has 0004 and not yet 0003. Delete it when the
-- real 0003 lands (the two cannot both exist: migrations must be numbered 1..N, each once).
SELECT 1;
