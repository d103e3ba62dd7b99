"""Class names SQL Server could never name a soft-labels column after are refused when a model
is trained on them (the third SQL Server audit, point 5): ``FOR JSON PATH`` nests a column
named ``a.b`` (Python joins the path back), but a name that starts or ends with ``.`` or holds
``..`` is Msg 13603, so its soft labels could never be read by heads.distill. Real training on
small vectors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sqlheads.compute.train import TrainParams, train
from sqlheads.engine.heads import HeadParams
from sqlheads.errors import ClassNameError

ONE_EPOCH = TrainParams(head_params=HeadParams(epochs=1))


def labelled(classes: list[str]) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    labels = [classes[i % len(classes)] for i in range(40)]
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    return pd.DataFrame(
        {
            "item_key": [f"k{i}" for i in range(40)],
            "label": labels,
            "vector": [row.tobytes() for row in vectors],
        }
    )


@pytest.mark.parametrize("bad", [".hidden", "trailing.", "very..good"])
def test_train_refuses_a_class_name_for_json_path_cannot_hold(bad: str) -> None:
    with pytest.raises(ClassNameError) as refused:
        train(labelled(["fine", bad]), params=ONE_EPOCH, dim=8)
    assert refused.value.number == 50073
    assert repr(bad) in str(refused.value) and "rename" in str(refused.value)


def test_train_keeps_class_names_with_single_inner_dots() -> None:
    out = train(labelled(["very.good", "bad"]), params=ONE_EPOCH, dim=8)
    assert out.iloc[0]["classes_json"] == '["bad", "very.good"]'
