"""``models``: a head's versions, or every head's, as the ``model_summary`` view lists them."""

from __future__ import annotations

import pandas as pd

from sqlheads.errors import NotFoundError
from sqlheads.store.repository import Store, validate_name


def models(store: Store, *, head: str | None = None) -> pd.DataFrame:
    if head is not None:
        validate_name("head", head)
    listed = store.read_view("model_summary", head=head)
    if head is not None and listed.empty:
        raise NotFoundError(
            f"head {head!r} has no versions: train it with `sqlheads train --head {head} ...`, "
            "or list every head with `sqlheads models`"
        )
    return listed
