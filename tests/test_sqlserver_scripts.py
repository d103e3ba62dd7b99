"""Every ``@script`` in sql/ is checked as SQL Server would run it, without a server: the Python
parses, only imports and calls ``sqlheads.procedures``, names only the declared ``@params``, and,
run with an ``InputDataSet`` whose columns are the ones its ``@input_data_1`` yields, sets every
OUTPUT parameter and an ``OutputDataSet`` whose columns are the ``WITH RESULT SETS`` columns."""

from __future__ import annotations

import ast
import hashlib

import numpy as np
import pandas as pd
import pytest
from sqlserver_tsql import ExternalCall, external_calls, input_columns

from sqlheads import procedures
from sqlheads.store.vectors import pack_rows

CALLS = {call.path.stem: call for call in external_calls()}
VERBS = {"embed_batch": "embed", "train_run": "train", "predict_batch": "predict"}
INPUTS = {"embed": procedures.EMBED_INPUT, "train": procedures.TRAIN_INPUT}


def test_every_verb_has_one_external_call() -> None:
    assert set(CALLS) == set(VERBS)


@pytest.mark.parametrize("name", sorted(VERBS))
def test_script_only_imports_and_calls(name: str) -> None:
    call = CALLS[name]
    tree = ast.parse(call.script)
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assigns = [n for n in tree.body if isinstance(n, ast.Assign)]
    assert len(tree.body) == 2 and len(imports) == 1 and len(assigns) == 1, "no logic in @script"
    assert imports[0].module == "sqlheads.procedures"
    called = assigns[0].value
    assert isinstance(called, ast.Call) and called.func.id == imports[0].names[0].name
    assert getattr(procedures, called.func.id)  # importable
    assert called.args[0].value == VERBS[name]
    targets = [t.id for t in assigns[0].targets[0].elts]
    assert targets == [
        "OutputDataSet",
        *sorted(call.outputs, key=["error_number", "error_message"].index),
    ]
    # Every name the script reads is a declared input parameter or InputDataSet.
    read = {
        n.id for n in ast.walk(called) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    assert read - {called.func.id} <= (set(call.params) - call.outputs) | {"InputDataSet"}
    # And every declared input parameter reaches the call.
    assert set(call.params) - call.outputs <= read


@pytest.mark.parametrize("name", sorted(VERBS))
def test_input_query_yields_the_functions_input(name: str) -> None:
    columns, _ = input_columns(CALLS[name].input_query)
    verb = VERBS[name]
    needed = {"embed": procedures.EMBED_INPUT, "train": procedures.TRAIN_INPUT}.get(
        verb, procedures.PREDICT_INPUT
    )
    assert set(needed) <= set(columns)


@pytest.mark.parametrize("name", sorted(VERBS))
def test_result_sets_are_the_functions_output(name: str) -> None:
    output = {"embed": procedures.EMBED_OUTPUT, "train": procedures.TRAIN_OUTPUT}.get(
        VERBS[name], procedures.PREDICT_OUTPUT
    )
    assert [c for c, _ in CALLS[name].result_columns] == list(output)


def run_script(call: ExternalCall, input_data: pd.DataFrame, **values: object) -> dict:
    """Run ``@script`` as Machine Learning Services does: parameters and InputDataSet as globals."""
    columns, _ = input_columns(call.input_query)
    assert list(input_data.columns) == columns
    namespace: dict = {"InputDataSet": input_data, **{p: None for p in call.params}, **values}
    exec(compile(call.script, f"<{call.path.name} @script>", "exec"), namespace)
    for output in call.outputs:
        assert namespace[output] is not None, f"{output} was not set"
    assert list(namespace["OutputDataSet"].columns) == [c for c, _ in call.result_columns]
    return namespace


def _vectors(n: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.array(["good", "bad"])[rng.integers(0, 2, n)]
    centres = {"good": np.ones(dim), "bad": -np.ones(dim)}
    vectors = np.stack([centres[y] + rng.normal(0, 1.0, dim) for y in labels]).astype(np.float32)
    return vectors, labels


TRAIN_DEFAULTS = dict(
    hidden=None,
    epochs=5,
    lr=1e-3,
    weight_decay=1e-5,
    batch_size=64,
    dropout=0.1,
    test_fraction=0.2,
    seed=0,
    deploy="if-better",
    deployed_macro_f1=None,
)


def test_train_then_predict_scripts() -> None:
    dim = 8
    vectors, labels = _vectors(200, dim)
    keys = [f"k{i}" for i in range(len(labels))]
    packed = pack_rows(vectors)
    train_input = pd.DataFrame({"item_key": keys, "label": labels, "vector": packed})
    trained = run_script(CALLS["train_run"], train_input, dim=dim, **TRAIN_DEFAULTS)
    assert trained["error_number"] == 0 and trained["error_message"] == ""
    row = trained["OutputDataSet"].iloc[0]
    assert row["macro_f1"] > 0.8 and bool(row["deploy"]) is True
    assert hashlib.sha256(row["blob"]).hexdigest() == row["sha256"]

    predict_input = pd.DataFrame(
        {"item_key": keys[:50] + ["no_vector"], "vector": packed[:50] + [None]}
    )
    scored = run_script(
        CALLS["predict_batch"], predict_input, model_sha256=row["sha256"], model_blob=row["blob"]
    )
    assert scored["error_number"] == 0
    out = scored["OutputDataSet"]
    assert len(out) == 50 and set(out["label"]) <= {"good", "bad"}
    assert (out["score"] >= 0.5).all()


def test_train_error_comes_back_with_its_number() -> None:
    dim = 8
    vectors, _ = _vectors(20, dim)
    one_class = pd.DataFrame(
        {
            "item_key": [f"k{i}" for i in range(20)],
            "label": ["good"] * 20,
            "vector": pack_rows(vectors),
        }
    )
    result = run_script(CALLS["train_run"], one_class, dim=dim, **TRAIN_DEFAULTS)
    assert result["error_number"] == 50004
    assert result["OutputDataSet"].empty
    missing = one_class.assign(vector=[None] * 20)
    result = run_script(CALLS["train_run"], missing, dim=dim, **TRAIN_DEFAULTS)
    assert result["error_number"] == 50006 and "embed" in result["error_message"]


def test_predict_refuses_a_corrupt_blob() -> None:
    result = run_script(
        CALLS["predict_batch"],
        pd.DataFrame({"item_key": ["a"], "vector": [b"\0" * 32]}),
        model_sha256="0" * 64,
        model_blob=b"not a model",
    )
    assert result["error_number"] == 50012


def test_embed_asks_for_the_encoder_bytes_when_not_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SQLHEADS_CACHE", str(tmp_path))
    batch = pd.DataFrame(
        {"item_key": ["1", "2"], "text": ["a good film", None], "stored_sha256": [None, None]}
    )
    result = run_script(
        CALLS["embed_batch"],
        batch,
        encoder_sha256="f" * 64,
        long_text="window",
        batch_size=32,
        cache_dir=str(tmp_path / "cache"),
    )
    assert result["error_number"] == 50009
    assert result["OutputDataSet"].empty


@pytest.mark.slow
def test_embed_script_with_the_real_encoder(tmp_path, monkeypatch) -> None:
    """The bytes are sent once (50009 retry), then the server-side cache answers by sha256."""
    from sqlheads import host
    from sqlheads.engine import encoder as encoder_module
    from sqlheads.store.repository import Store

    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    host.init(store)
    encoder = host.register_encoder(store)
    onnx, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
    cache = tmp_path / "server-cache"
    monkeypatch.setenv("SQLHEADS_CACHE", str(cache))
    # Each external script runs in a fresh process: nothing is loaded in memory yet.
    monkeypatch.setattr(encoder_module, "_loaded", {})
    texts = ["a moving, funny film", "dull and far too long", ""]
    batch = pd.DataFrame(
        {
            "item_key": ["1", "2", "3"],
            "text": texts,
            "stored_sha256": [procedures.text_sha256(texts[0]), None, None],
        }
    )
    arguments = dict(
        encoder_sha256=encoder.sha256, long_text="window", batch_size=32, cache_dir=str(cache)
    )
    first = run_script(CALLS["embed_batch"], batch, **arguments)
    assert first["error_number"] == 50009
    second = run_script(
        CALLS["embed_batch"],
        batch,
        **arguments,
        encoder_onnx=onnx,
        tokenizer_json=tokenizer_json,
        dim=encoder.dim,
        max_length=encoder.max_length,
    )
    assert second["error_number"] == 0
    out = second["OutputDataSet"].set_index("item_key")
    assert "1" not in out.index  # unchanged text: skipped
    assert len(out.loc["2", "vector"]) == encoder.dim * 4
    assert out.loc["3", "reject_reason"] == "text is empty"
    monkeypatch.setattr(encoder_module, "_loaded", {})  # the next call: a new process again
    third = run_script(CALLS["embed_batch"], batch, **arguments)  # on disk now: sha256 only
    assert third["error_number"] == 0
