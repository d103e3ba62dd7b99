"""How a long verb tells its caller how far it got."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int | None], None]  # (rows just done, total rows or None)
Stage = Callable[[str], None]  # what a long call is doing now, e.g. exporting the encoder


def increments(progress: Progress) -> Callable[[int, int], None]:
    """``progress`` (what was just done) fed from reports of what is done so far."""
    reported = 0

    def report(done: int, total: int) -> None:
        nonlocal reported
        progress(done - reported, total)
        reported = done

    return report
