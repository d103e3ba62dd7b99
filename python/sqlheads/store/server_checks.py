"""What a SQL Server must be before sqlheads goes into it, and what its smoke script says after.

Every SQL Server audit found a first-deployment failure that only a real server shows; these
checks make the two that can be told in advance fail at once, with the fix:

- the database's compatibility level (the fourth audit, finding 7): sqlheads' T-SQL is written
  for, and parsed under, SQL Server 2022's level 160 (``STRING_SPLIT`` and ``OPENJSON`` need 130,
  ``STRING_SPLIT``'s ordinal argument SQL Server 2022); a database left at an older level would
  take every object and fail every verb at run time. :func:`check_compatibility` refuses it
  (50075) before anything is created: ``sqlheads init`` and Alembic (``migrations/env.py``), and
  ``docker/migrate.py``; an offline script starts with :data:`COMPATIBILITY_GUARD`.
- the module signature (finding 8): analysts get EXECUTE ANY EXTERNAL SCRIPT only through the
  certificate that signs the procedures that run Python. No Microsoft page found says whether a
  signature reaches ``sys.sp_execute_external_script``; ``docker/smoke.sql`` runs ``heads.embed``
  as a user who is only in heads_analyst, and :func:`smoke_problems` reads its answer: a
  permission refusal there is reported with the exact fix (:data:`SIGNATURE_FIX`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, text

from sqlheads.errors import ServerSetupError

MINIMUM_COMPATIBILITY_LEVEL = 160  # SQL Server 2022's
LEVEL = text(
    "SELECT d.name, d.compatibility_level, "
    "CONVERT(int, SERVERPROPERTY('ProductMajorVersion')) AS major "
    "FROM sys.databases AS d WHERE d.name = COALESCE(:database, DB_NAME())"
)
# The same check at the top of an offline script (alembic ... --sql), for the DBA who reviews
# and runs it: sqlcmd -b stops there.
COMPATIBILITY_GUARD = (
    "IF (SELECT d.compatibility_level FROM sys.databases AS d WHERE d.name = DB_NAME()) "
    f"< {MINIMUM_COMPATIBILITY_LEVEL} "
    f"THROW {ServerSetupError.number}, N'sqlheads needs database compatibility level "
    f"{MINIMUM_COMPATIBILITY_LEVEL} (SQL Server 2022): run ALTER DATABASE CURRENT SET "
    f"COMPATIBILITY_LEVEL = {MINIMUM_COMPATIBILITY_LEVEL}; then this script again', 1"
)


def check_compatibility(connection: Connection, database: str | None = None) -> int:
    """50075 unless ``database`` (default: the connection's) is at compatibility level 160 or
    above; its level otherwise. Creates nothing."""
    row = connection.execute(LEVEL, {"database": database}).one()
    refused = compatibility_refusal(str(row.name), int(row.compatibility_level), row.major)
    if refused is not None:
        raise refused
    return int(row.compatibility_level)


def compatibility_refusal(name: str, level: int, major: int | None) -> ServerSetupError | None:
    """Why database ``name`` at ``level``, on a server of major version ``major``, cannot take
    sqlheads, with the fix; None when it can."""
    if level >= MINIMUM_COMPATIBILITY_LEVEL:
        return None
    quoted = "[" + name.replace("]", "]]") + "]"
    if major is not None and int(major) < 16:
        fix = (
            f"this server is SQL Server major version {major}, which has no level "
            f"{MINIMUM_COMPATIBILITY_LEVEL}: install into SQL Server 2022 or later"
        )
    else:
        fix = (
            f"run ALTER DATABASE {quoted} SET COMPATIBILITY_LEVEL = "
            f"{MINIMUM_COMPATIBILITY_LEVEL}; (as its owner; other code in the database runs "
            "under the new level too: test it), then install again"
        )
    return ServerSetupError(
        f"database {name} is at compatibility level {level}, and sqlheads' T-SQL needs "
        f"{MINIMUM_COMPATIBILITY_LEVEL} (SQL Server 2022: STRING_SPLIT with its ordinal, "
        f"OPENJSON); nothing was created: {fix}"
    )


# What the smoke script's rows (question, found) must say. The questions are docker/smoke.sql's.
SIGNED_PYTHON = "heads.embed as a heads_analyst (signed Python)"
OWN_PYTHON = "own Python as a heads_analyst"
SIGNATURE_FIX = (
    "the certificate's permission does not reach sys.sp_execute_external_script on this "
    "server, so no analyst can run a verb that runs Python. Either give analysts EXECUTE ANY "
    "EXTERNAL SCRIPT through a role of your own, which no sqlheads upgrade revokes (they can "
    "then run Python of their own: sqlheads' least privilege is lost):\n"
    "    CREATE ROLE heads_external_python;\n"
    "    GRANT EXECUTE ANY EXTERNAL SCRIPT TO heads_external_python;\n"
    "    ALTER ROLE heads_external_python ADD MEMBER heads_analyst;\n"
    "or keep analysts out of the verbs that run Python until a revision that does not rely on "
    "the signature; see docs/guides/dba.md, 'If the signature does not reach the external "
    "script'"
)
UNSIGNED_FIX = (
    "the procedures that run Python are not signed: run EXEC heads.sign_external_scripts; as "
    "the database owner (every migration does it last; a failed one may not have)"
)
# Errors of a permission refused: 297 (the user does not have permission), 229 (denied on an
# object), 15247 (no permission to perform the action).
PERMISSION_ERRORS = ("FAILED: 297 ", "FAILED: 229 ", "FAILED: 15247 ")


def smoke_problems(rows: Iterable[Any]) -> list[str]:
    """What docker/smoke.sql's answers (rows of ``question``, ``found``) say is wrong after a
    deployment, each with its fix; [] when nothing is."""
    found = {str(r.question): str(r.found or "") for r in rows}
    problems = []
    signed = found.get(SIGNED_PYTHON, "missing: the smoke script did not reach it")
    if not signed.startswith("ran:"):
        if not any(q.startswith("signed module heads.") for q in found):
            problems.append(f"{SIGNED_PYTHON}: {signed}: {UNSIGNED_FIX}")
        elif signed.startswith(PERMISSION_ERRORS) or "EXECUTE ANY EXTERNAL SCRIPT" in signed:
            problems.append(f"{SIGNED_PYTHON}: {signed}: {SIGNATURE_FIX}")
        else:
            problems.append(f"{SIGNED_PYTHON}: {signed}")
    if not found.get(OWN_PYTHON, "").startswith("refused"):
        problems.append(
            f"{OWN_PYTHON}: {found.get(OWN_PYTHON, 'missing')}: revoke EXECUTE ANY EXTERNAL "
            "SCRIPT from heads_analyst and from every role its members are in"
        )
    problems += [
        f"{question}: {answer}"
        for question, answer in found.items()
        if question not in (SIGNED_PYTHON, OWN_PYTHON) and answer.startswith(("FAILED", "REFUSED"))
    ]
    return problems
