"""Profiles as rows (version 9): a later migration adds a privilege with one call, every role
holding the profile gets it, roles granted before version 9 are members, and no profile can read
or widen the rows."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import sql

from pgwork.db import grant, migrate
from tests.support.db import MakeRole
from tests.support.versions import at_version

Denied = psycopg.errors.InsufficientPrivilege
PROBE = "EXECUTE ON FUNCTION pgwork.profile_probe(bigint)"


def _add_probe(dsn: str, profile: str) -> int:
    """What a later migration does: a new function, granted to a profile by one call."""
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE FUNCTION pgwork.profile_probe(n bigint) RETURNS bigint LANGUAGE sql AS 'SELECT n + 1'")
        conn.execute("REVOKE EXECUTE ON FUNCTION pgwork.profile_probe(bigint) FROM PUBLIC")
        row = conn.execute("SELECT pgwork.add_profile_privilege(%s, %s)", (profile, PROBE)).fetchone()
    assert row is not None
    return int(row[0])


def _can_probe(role_dsn: str) -> bool:
    with psycopg.connect(role_dsn, autocommit=True) as conn:
        try:
            conn.execute("SELECT pgwork.profile_probe(1)")
        except Denied:
            return False
    return True


def test_an_added_privilege_reaches_every_role_holding_the_profile_and_no_other(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    producer = make_role("producer")  # included in worker, but does not include it
    reader = make_role("reader")
    assert _add_probe(dsn, "worker") == 1
    assert _can_probe(worker)
    assert not _can_probe(producer)
    assert not _can_probe(reader)
    # Granted after the migration: the row is the profile.
    assert _can_probe(make_role("worker"))
    assert not _can_probe(make_role("maintainer"))


def test_a_privilege_of_an_included_profile_reaches_the_profiles_that_include_it(dsn: str, make_role: MakeRole) -> None:
    worker, maintainer, producer = make_role("worker"), make_role("maintainer"), make_role("producer")
    assert _add_probe(dsn, "reader") == 3
    assert _can_probe(worker) and _can_probe(maintainer) and _can_probe(producer)


def test_a_dropped_privilege_is_revoked_from_members_and_left_out_of_later_grants(
    dsn: str, make_role: MakeRole
) -> None:
    worker = make_role("worker")
    _add_probe(dsn, "worker")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT pgwork.drop_profile_privilege('worker', %s)", (PROBE,)).fetchone() == (1,)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="has no privilege"):
            conn.execute("SELECT pgwork.drop_profile_privilege('worker', %s)", (PROBE,))
    assert not _can_probe(worker)
    # A later grant narrows to the rows: the probe is not among them any more.
    assert not _can_probe(make_role("worker"))


def test_a_role_renamed_keeps_its_profile_and_a_dropped_one_is_skipped(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    old = psycopg.conninfo.conninfo_to_dict(worker)["user"]
    assert isinstance(old, str)
    gone = f"pgwork_t_gone_{uuid.uuid4().hex[:8]}"
    new = f"{old}_r"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(gone)))
    grant(dsn, gone, "worker")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} RENAME TO {}").format(sql.Identifier(old), sql.Identifier(new)))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(gone)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(gone)))
    try:
        assert _add_probe(dsn, "worker") == 1
        assert _can_probe(psycopg.conninfo.make_conninfo(worker, user=new))
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER ROLE {} RENAME TO {}").format(sql.Identifier(new), sql.Identifier(old)))


@pytest.mark.parametrize(
    "privilege",
    [
        "SELECT ON pg_catalog.pg_authid",
        "EXECUTE ON FUNCTION public.f()",
        "SELECT ON pgwork.stats TO PUBLIC; --",
        "ALL ON ALL TABLES IN SCHEMA pgwork",
        "USAGE ON SCHEMA public",
        "select on pgwork.stats",
    ],
)
def test_a_row_can_name_only_one_privilege_on_one_pgwork_object(dsn: str, privilege: str) -> None:
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("SELECT pgwork.add_profile_privilege('reader', %s)", (privilege,))


def test_no_profile_reads_or_writes_the_profile_rows(dsn: str, make_role: MakeRole) -> None:
    for profile in ("worker", "maintainer"):
        role = make_role(profile)
        with psycopg.connect(role, autocommit=True) as conn:
            for statement in (
                "SELECT * FROM pgwork.profile_privileges",
                "SELECT * FROM pgwork.profile_members",
                "INSERT INTO pgwork.profile_privileges VALUES ('reader', 'SELECT ON pgwork.jobs')",
                "SELECT pgwork.add_profile_privilege('reader', 'SELECT ON pgwork.jobs')",
                "SELECT pgwork.grant_profiles(current_user, ARRAY['maintainer'])",
            ):
                with pytest.raises(Denied):
                    conn.execute(statement)  # type: ignore[arg-type]


def test_roles_granted_before_version_9_are_members_after_it(empty_dsn: str) -> None:
    at_version(empty_dsn, 8)
    roles = {profile: f"pgwork_t_{profile}_{uuid.uuid4().hex[:8]}" for profile in ("reader", "worker", "maintainer")}
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for role in roles.values():
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            for profile, role in roles.items():  # as pgwork at version 8 granted
                conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY[%s])", (role, profile))
        assert 9 in migrate(empty_dsn)
        with psycopg.connect(empty_dsn) as conn:
            members = {
                (str(name), str(profile))
                for name, profile in conn.execute(
                    "SELECT r.rolname, m.profile FROM pgwork.profile_members AS m JOIN pg_roles AS r ON r.oid = m.role"
                ).fetchall()
            }
        assert members == {
            (roles["reader"], "reader"),
            (roles["worker"], "reader"),
            (roles["worker"], "producer"),
            (roles["worker"], "worker"),
            (roles["maintainer"], "reader"),
            (roles["maintainer"], "reaper"),
            (roles["maintainer"], "maintainer"),
        }
        _add_probe(empty_dsn, "reaper")
        as_role = {p: psycopg.conninfo.make_conninfo(empty_dsn, user=r) for p, r in roles.items()}
        assert _can_probe(as_role["maintainer"])
        assert not _can_probe(as_role["worker"]) and not _can_probe(as_role["reader"])
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            for role in roles.values():
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
