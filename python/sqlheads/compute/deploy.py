"""``decide``: the deploy decision again, for a training whose deployed version changed."""

from __future__ import annotations

from typing import Annotated

import pandas as pd

from sqlheads.compute.columns import DECIDE_INPUT, DECIDE_OUTPUT, require_columns
from sqlheads.compute.versions import VersionParams
from sqlheads.keywords import Door
from sqlheads.settings import decide_deploy, deploy_reason


def decide(
    input_data: pd.DataFrame, *, version: Annotated[VersionParams, Door(only=("deploy",))]
) -> pd.DataFrame:
    """The deploy decision again, for a training whose deployed version changed meanwhile.

    ``heads.train`` trains outside its write transaction; if another session deployed a
    version while it trained, the decision made against the old one is stale, and T-SQL asks
    Python again (its ``deploy`` policy) rather than restating :func:`decide_deploy` (one row
    in, one row out).
    """
    require_columns(input_data, DECIDE_INPUT, "decide input")
    row = input_data.iloc[0]
    deployed = row["deployed_macro_f1"]
    deployed_f1 = None if deployed is None or pd.isna(deployed) else float(deployed)
    decision = decide_deploy(version.deploy, float(row["new_macro_f1"]), deployed_f1)
    return pd.DataFrame([[decision, deploy_reason(version.deploy)]], columns=list(DECIDE_OUTPUT))
