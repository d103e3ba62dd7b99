"""The T-SQL surface of sqlheads on SQL Server, versioned per migration revision (``sqlheads_sql``).

Each migration revision that creates or changes T-SQL objects has a folder named after it
(``sql/0002/``, ``sql/0003/``, ...) holding the *whole* text of every object it creates or
changes, one file per object, in ``views/``, ``internal/``, ``procedures/`` and ``roles/``, and,
optionally, ``dropped.txt`` (one ``kind heads.name`` a line) for objects it removes. A folder is
frozen once its revision is released: editing an applied revision's text would change what a
server that ran it holds without that server ever running the edit (issue 10, point 19). This
is Alembic's "replaceable objects" recipe with the texts kept as .sql files, so that Microsoft's
grammar and sqlfluff check every version of every object.

- upgrade to revision R runs R's files (creation order) and drops what R drops;
- downgrade from R restores, for every object R touched, its text in the newest earlier
  revision (or drops it if R created it), and re-creates what R dropped;
- the objects as they stand at a revision are the overlay of the folders up to it
  (:func:`object_files`).

A role file states the role's whole grant list: before it runs, every permission the role holds
on the ``heads`` schema and its objects (and the database permissions role files grant) is
revoked, so that a permission a later revision leaves out is really gone (and a downgrade gets
back exactly the earlier grants). A DBA's grants in other schemas are left alone.

To add a procedure in a later revision (say ``0004`` adds ``heads.distill``): put
``sql/0004/procedures/distill.sql`` (and a new full copy of any role file whose grants change,
e.g. ``sql/0004/roles/heads_analyst.sql``), and write ``migrations/versions/0004_*.py`` whose
``upgrade``/``downgrade`` pass :func:`upgrade_batches` / :func:`downgrade_batches` for ``"0004"``
to :func:`run`, as 0003 does. A procedure that calls ``sp_execute_external_script`` is signed by
``heads.sign_external_scripts`` at the end of every upgrade and downgrade; nothing else to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parent

# Folders in the order their objects can be created: helpers before the procedures that call
# them, everything before the roles that are granted on it.
ORDER = ("views", "internal", "procedures", "roles")
# Within a folder, these first and in this order: helpers before the procedures that run
# Python; a role before the role that joins it.
_FIRST = (
    "cache_dir.sql",
    "assert_name.sql",
    "assert_query_columns.sql",
    "report_progress.sql",
    "lock_resource.sql",
    "setting.sql",
    "setting_int.sql",
    "assert_no_transaction.sql",
    "take_lock.sql",
    "release_lock.sql",
    "stage_query.sql",
    "heads_reader.sql",
    "heads_analyst.sql",
    "heads_admin.sql",
)
# The procedure that signs every module calling sp_execute_external_script (issue 10, point
# 17). It exists from revision 0003 on.
SIGNER = "heads.sign_external_scripts"
FIRST_SIGNED_REVISION = "0003"

_GO = re.compile(r"^[ \t]*GO[ \t]*;?[ \t]*$", re.IGNORECASE | re.MULTILINE)
_KINDS = {"views": "view", "procedures": "procedure", "roles": "role", "internal": "procedure"}


@dataclass(frozen=True)
class SqlObject:
    kind: str  # view, procedure, function, role
    name: str  # heads.embed, heads_analyst


def revisions() -> list[str]:
    """Every revision that has a folder, oldest first."""
    return sorted(p.name for p in ROOT.iterdir() if p.is_dir() and re.fullmatch(r"\d{4}", p.name))


def revision_files(revision: str) -> list[Path]:
    """The object files of one revision, in creation order."""
    files: list[Path] = []
    for folder in ORDER:
        found = sorted((ROOT / revision / folder).glob("*.sql"))
        found.sort(key=lambda p: _FIRST.index(p.name) if p.name in _FIRST else len(_FIRST))
        files.extend(found)
    return files


def dropped(revision: str) -> list[SqlObject]:
    """The objects a revision removes (``dropped.txt``: ``kind heads.name`` a line)."""
    path = ROOT / revision / "dropped.txt"
    if not path.is_file():
        return []
    lines = [line.split("#", 1)[0].split() for line in path.read_text().splitlines()]
    return [SqlObject(words[0], words[1]) for words in lines if words]


def object_name(path: Path) -> tuple[str, str]:
    """``(kind, name)`` of a file's object: ("procedure", "heads.embed"), ("role", ...)."""
    kind = _KINDS.get(path.parent.name)
    if kind is None:
        raise ValueError(f"{path} is not an object file")
    if path.parent.name == "internal" and re.search(
        r"^CREATE OR ALTER FUNCTION", path.read_text(encoding="utf-8"), re.M
    ):
        kind = "function"
    return kind, path.stem if kind == "role" else f"heads.{path.stem}"


def _sort_key(path: Path) -> tuple[int, int, str]:
    folder = ORDER.index(path.parent.name)
    first = _FIRST.index(path.name) if path.name in _FIRST else len(_FIRST)
    return folder, first, path.name


def object_files(upto: str | None = None) -> list[Path]:
    """Every object as it stands at revision ``upto`` (default: the newest), creation order."""
    current: dict[SqlObject, Path] = {}
    for revision in revisions():
        if upto is not None and revision > upto:
            break
        for gone in dropped(revision):
            current.pop(gone, None)
        for path in revision_files(revision):
            current[SqlObject(*object_name(path))] = path
    return sorted(current.values(), key=_sort_key)


def all_files() -> list[Path]:
    """Every .sql file of every revision, and the server setup script."""
    return [ROOT / "setup.sql", *(p for r in revisions() for p in revision_files(r))]


def batches(path: Path) -> list[str]:
    """The batches of a file, split on ``GO`` lines as sqlcmd and SSMS do."""
    text = path.read_text(encoding="utf-8")
    return [b.strip() for b in _GO.split(text) if _strip_comments(b).strip()]


def _strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def signs(revision: str) -> bool:
    """Whether the objects at this revision are signed (0003 and later)."""
    return revision >= FIRST_SIGNED_REVISION


# -- migration steps ---------------------------------------------------------------------------

# Revoke every permission a role holds on the heads schema and its objects (and the database
# permissions some role file grants) before its file grants the full list; a DBA's grant in
# another schema (GRANT SELECT ON dbo.reviews TO heads_sidecar) is not ours to take back (issue
# 19, point 4). Names come from the catalog and are QUOTENAME'd; ROLE_NAME is one of
# sql/*/roles/, never a caller's value. Lists are built by STRING_AGG: Microsoft documents that
# SELECT @v = @v + ... over rows can return a partial list. CASCADE: a permission a DBA granted
# WITH GRANT OPTION cannot be revoked without it (Msg 4611), and a column-level grant
# (heads_sidecar's UPDATE of job_queue's claim columns) is revoked column by column.
REVOKE_ROLE = """
DECLARE @revoke nvarchar(max);
SELECT
    @revoke = STRING_AGG(
        CONVERT(nvarchar(max), N'REVOKE ' + p.permission_name COLLATE DATABASE_DEFAULT
            + CASE
                WHEN p.class = 1 AND p.minor_id <> 0
                    THEN N' (' + QUOTENAME(COL_NAME(p.major_id, p.minor_id)) + N')'
                ELSE N''
            END
            + CASE
                WHEN p.class = 1
                    THEN N' ON OBJECT::' + QUOTENAME(OBJECT_SCHEMA_NAME(p.major_id)) + N'.'
                        + QUOTENAME(OBJECT_NAME(p.major_id))
                WHEN p.class = 3 THEN N' ON SCHEMA::' + QUOTENAME(SCHEMA_NAME(p.major_id))
                ELSE N''
            END
            + N' FROM ' + QUOTENAME(r.name) + N' CASCADE;'),
        N' '
    )
FROM sys.database_permissions AS p
INNER JOIN sys.database_principals AS r ON p.grantee_principal_id = r.principal_id
WHERE
    r.name = N'ROLE_NAME'
    AND (
        (p.class = 1 AND OBJECT_SCHEMA_NAME(p.major_id) = N'heads')
        OR (p.class = 3 AND SCHEMA_NAME(p.major_id) = N'heads')
        OR (p.class = 0 AND p.permission_name IN (N'EXECUTE ANY EXTERNAL SCRIPT'))
    );
IF @revoke IS NOT NULL EXEC sys.sp_executesql @revoke
"""

# Dropping a role needs its members removed first (same rules as above).
DROP_ROLE = """
DECLARE @drop_members nvarchar(max);
SELECT
    @drop_members = STRING_AGG(
        CONVERT(nvarchar(max), N'ALTER ROLE ' + QUOTENAME(r.name)
            + N' DROP MEMBER ' + QUOTENAME(m.name) + N';'),
        N' '
    )
FROM sys.database_role_members AS rm
INNER JOIN sys.database_principals AS r ON rm.role_principal_id = r.principal_id
INNER JOIN sys.database_principals AS m ON rm.member_principal_id = m.principal_id
WHERE r.name = N'ROLE_NAME';
IF @drop_members IS NOT NULL EXEC sys.sp_executesql @drop_members;
IF DATABASE_PRINCIPAL_ID(N'ROLE_NAME') IS NOT NULL DROP ROLE ROLE_NAME
"""


def _create(path: Path) -> list[str]:
    kind, name = object_name(path)
    revoke = [REVOKE_ROLE.replace("ROLE_NAME", name).strip()] if kind == "role" else []
    return revoke + batches(path)


def _drop(kind: str, name: str) -> str:
    if kind == "role":
        return DROP_ROLE.replace("ROLE_NAME", name).strip()
    return f"DROP {kind.upper()} IF EXISTS {name}"


def _earlier(revision: str) -> dict[SqlObject, Path]:
    before = [r for r in revisions() if r < revision]
    if not before:
        return {}
    return {SqlObject(*object_name(p)): p for p in object_files(before[-1])}


def object_upgrade_batches(revision: str) -> list[str]:
    """Create or alter the objects of ``revision``, then drop what it drops."""
    found = [b for path in revision_files(revision) for b in _create(path)]
    return found + [_drop(o.kind, o.name) for o in reversed(dropped(revision))]


def object_downgrade_batches(revision: str) -> list[str]:
    """Put every object ``revision`` touched back as the revision before it had it."""
    earlier = _earlier(revision)
    touched = [SqlObject(*object_name(p)) for p in revision_files(revision)]
    new = [o for o in touched if o not in earlier]
    restore = {o for o in touched if o in earlier} | {o for o in dropped(revision) if o in earlier}
    found = [_drop(o.kind, o.name) for o in reversed(new)]
    for path in sorted((earlier[o] for o in restore), key=_sort_key):
        found += _create(path)
    return found


def settings_batch(settings: dict) -> str:
    """Rewrite ``heads.settings`` from Python's :data:`sqlheads.settings.SETTINGS`."""

    def literal(value: object) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, int):
            return str(value)
        return "N'" + str(value).replace("'", "''") + "'"

    rows = ",\n    ".join(
        "("
        + ", ".join(
            [
                literal(name),
                literal(None if s.default is None else str(s.default)),
                literal(",".join(s.choices) or None),
                literal(s.minimum),
                literal(s.maximum),
            ]
        )
        + ")"
        for name, s in sorted(settings.items())
    )
    return (
        "DELETE FROM heads.settings;\n"
        "INSERT INTO heads.settings (name, default_value, choices, minimum, maximum)\n"
        f"VALUES\n    {rows}"
    )


def run(batches: list[str]) -> None:
    """Run batches inside a migration: into the offline script (``--sql``, each followed by
    GO), or on the connection as written (no bind-parameter parsing of the T-SQL)."""
    from alembic import op

    for batch in batches:
        if op.get_context().as_sql:
            op.execute(batch)
        else:
            op.get_bind().exec_driver_sql(batch)


def upgrade_batches(revision: str, settings: dict) -> list[str]:
    """Everything an upgrade to ``revision`` (0003 or later) runs, in order."""
    return [
        *object_upgrade_batches(revision),
        settings_batch(settings),
        f"EXEC {SIGNER}",
    ]


def downgrade_batches(revision: str, settings: dict) -> list[str]:
    """Everything a downgrade from ``revision`` runs; from 0003 the signatures go too."""
    earlier = [r for r in revisions() if r < revision]
    previous = earlier[-1] if earlier else None
    if previous is None or not signs(previous):
        return [f"EXEC {SIGNER} @remove = 1", *object_downgrade_batches(revision)]
    return [*object_downgrade_batches(revision), settings_batch(settings), f"EXEC {SIGNER}"]
