"""How a long call tells its caller how far it got: one protocol from the engine's loops up
through the verbs to the command line's bar and the sidecar's job row.

A call reports ``progress(done, total, stage)``, always with all three: ``done`` units of the
current stage so far (a running total, never an increment), out of ``total`` (None while
unknown); ``stage`` names what runs from now on (e.g. ``"exporting the encoder to ONNX (first use
only)"``) when it changes, and is None otherwise, keeping the last one. What the units are
(rows, epochs, optimiser steps, L-BFGS iterations) is the caller's to know: it asked for the
work. The engine knows nothing of who listens: a bar, lines on stderr, a job row, or a test.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, done: int, total: int | None, stage: str | None) -> None: ...


def after(progress: Progress | None, before: int, total: int | None) -> Progress | None:
    """``progress`` of a part of a larger count: the part's running totals counted on from
    ``before`` units already done, out of the whole ``total`` (texts scored in chunks, windows
    embedded in pipelined parts)."""
    if progress is None:
        return None

    def report(done: int, _part_total: int | None, stage: str | None) -> None:
        progress(before + done, total, stage)

    return report
