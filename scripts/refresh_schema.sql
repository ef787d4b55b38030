-- The catalog reads behind scripts/refresh_schema.py: the whole `pgwork` schema of a migrated
-- database, each object by the server's own deparser (pg_get_*def), sorted by name, so the file
-- it writes is the same on every run and on every supported PostgreSQL (15 to 18).

-- name: types
SELECT format('CREATE TYPE %s AS ENUM (%s);', t.oid::regtype,
              string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder)) AS ddl
FROM pg_type t
JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_enum e ON e.enumtypid = t.oid
WHERE n.nspname = 'pgwork'
GROUP BY t.oid
ORDER BY t.oid::regtype::text;

-- name: tables
SELECT c.oid, c.oid::regclass::text AS name, c.relkind::text AS kind,
       coalesce(array_to_string(c.reloptions, ', '), '') AS options, c.relrowsecurity AS rls,
       coalesce(' PARTITION BY ' || pg_get_partkeydef(c.oid), '') AS partitioned,
       CASE WHEN c.relispartition
            THEN format(' PARTITION OF %s %s', (SELECT i.inhparent::regclass FROM pg_inherits i WHERE i.inhrelid = c.oid),
                        pg_get_expr(c.relpartbound, c.oid))
            ELSE '' END AS partition_of
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgwork' AND c.relkind IN ('r', 'p')
ORDER BY name;

-- name: columns
-- Column order is the table's own (attnum): it is part of the table's shape.
SELECT a.attname AS name,
       format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS not_null,
       pg_get_expr(d.adbin, d.adrelid) AS default_expr,
       a.attidentity AS identity,
       a.attgenerated AS generated,
       -- The planner's overrides only (migration 29's n_distinct): some builds keep other entries
       -- here that vary between databases.
       coalesce((SELECT string_agg(o, ', ' ORDER BY o) FROM unnest(a.attoptions) AS o
                  WHERE o LIKE 'n\_distinct%%'), '') AS options
FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %(table)s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;

-- name: constraints
-- PostgreSQL 18 stores NOT NULL as constraints too (contype 'n'); the columns already say it.
SELECT conname AS name, pg_get_constraintdef(oid, true) AS definition
FROM pg_constraint
WHERE conrelid = %(table)s AND contype <> 'n'
ORDER BY conname;

-- name: indexes
SELECT pg_get_indexdef(i.indexrelid) || ';' AS ddl
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgwork'
ORDER BY c.relname;

-- name: sequences
-- Sequences of their own; identity columns' sequences belong to their column.
SELECT format('CREATE SEQUENCE %s;', c.oid::regclass) AS ddl
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgwork' AND c.relkind = 'S'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'i')
ORDER BY c.relname;

-- name: views
SELECT format(E'CREATE VIEW %s AS\n%s', c.oid::regclass, pg_get_viewdef(c.oid, true)) AS ddl
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgwork' AND c.relkind IN ('v', 'm')
ORDER BY c.relname;

-- name: functions
SELECT rtrim(pg_get_functiondef(p.oid), E'\n') || ';' AS ddl
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'pgwork' AND p.prokind IN ('f', 'p')
ORDER BY p.proname, pg_get_function_identity_arguments(p.oid);

-- name: triggers
SELECT pg_get_triggerdef(t.oid, true) || ';' AS ddl
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgwork' AND NOT t.tgisinternal
ORDER BY c.relname, t.tgname;

-- name: policies
SELECT format('POLICY %I ON %s: %s', polname, polrelid::regclass, pg_get_expr(polqual, polrelid)) AS ddl
FROM pg_policy p
JOIN pg_class c ON c.oid = p.polrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgwork'
ORDER BY c.relname, polname;

-- name: grants
-- Who may do what, as the difference from the built-in default (acldefault): a GRANT beyond it, a
-- REVOKE of what it gives (EXECUTE to PUBLIC on a new function). The owner's own entries are left
-- out: it holds every right anyway, and the rights there are differ by version (17 added MAINTAIN).
WITH objects AS (
    SELECT 'SCHEMA ' || quote_ident(n.nspname) AS object, 'n'::"char" AS kind, n.nspacl AS acl, n.nspowner AS owner
    FROM pg_namespace n WHERE n.nspname = 'pgwork'
    UNION ALL
    SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE ' ELSE 'TABLE ' END || c.oid::regclass::text,
           CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relacl, c.relowner
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'pgwork' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
    UNION ALL
    SELECT 'FUNCTION ' || p.oid::regprocedure::text, 'f'::"char", p.proacl, p.proowner
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'pgwork'
),
actual AS (
    SELECT o.object, o.owner, x.grantee, x.privilege_type
    FROM objects o, aclexplode(coalesce(o.acl, acldefault(o.kind, o.owner))) x
),
defaults AS (
    SELECT o.object, o.owner, x.grantee, x.privilege_type
    FROM objects o, aclexplode(acldefault(o.kind, o.owner)) x
),
changes AS (
    SELECT 'GRANT' AS verb, * FROM (SELECT * FROM actual EXCEPT SELECT * FROM defaults) g
    UNION ALL
    SELECT 'REVOKE', * FROM (SELECT * FROM defaults EXCEPT SELECT * FROM actual) r
)
SELECT format('%s %s ON %s %s %s;', verb, privilege_type, object, CASE verb WHEN 'GRANT' THEN 'TO' ELSE 'FROM' END,
              CASE WHEN grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(grantee)) END) AS ddl
FROM changes
WHERE grantee <> owner
ORDER BY object, ddl;

-- name: profile_rows
SELECT format('(%L, %L)', profile, privilege) AS ddl
FROM pgwork.profile_privileges
ORDER BY profile, privilege;

-- name: version
SELECT coalesce(max(version), 0) AS version FROM pgwork.schema_version;
