"""The doors' parameter objects (``sqlheads.keywords.spread``): flat keywords in, each verb's
objects built and validated once, before any work; the names T-SQL passes reach their fields."""

from __future__ import annotations

import ast
import inspect

import pandas as pd
import pytest
from sqlserver_tsql import external_calls

from sqlheads import host, procedures
from sqlheads.compute.train import TrainParams
from sqlheads.compute.versions import VersionParams
from sqlheads.engine.heads import HeadParams
from sqlheads.engine.kinds import student_params
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.word.student import WordStudentParams
from sqlheads.errors import InvalidParameterError, UnknownKindError
from sqlheads.keywords import spread
from sqlheads.procedures import sql_server_call

NOT_A_STORE = object()  # a door that validates first never gets as far as the store


def test_every_name_the_frozen_tsql_passes_is_a_keyword_of_its_door() -> None:
    for call in external_calls():
        (called,) = [n for n in ast.walk(ast.parse(call.script)) if isinstance(n, ast.Call)]
        door = procedures.SQL_SERVER_VERBS[called.args[0].value][0]
        passed = {k.arg for k in called.keywords}
        assert passed <= set(inspect.signature(door).parameters), call.path


def test_the_flat_keywords_build_the_objects_with_their_defaults() -> None:
    seen = {}

    def verb(input_data, *, params: TrainParams, dim: int) -> None:
        seen.update(params=params, dim=dim)

    spread(verb)(None, epochs=3, deploy="Always", dim=8)
    expected = TrainParams(head_params=HeadParams(epochs=3), version=VersionParams(deploy="always"))
    assert seen == {"params": expected, "dim": 8}
    spread(verb)(None, head_params=HeadParams(lr=0.01), dim=8)  # a part whole
    assert seen["params"] == TrainParams(head_params=HeadParams(lr=0.01))
    spread(verb)(None, params=expected, dim=8)  # or the whole object, as a sidecar's job does
    assert seen["params"] is expected
    spread(verb)(None, epochs=None, dim=8)  # None is the default, as T-SQL's NULL
    assert seen["params"] == TrainParams()


def test_a_bad_value_is_refused_at_the_door_before_any_work() -> None:
    with pytest.raises(InvalidParameterError, match=r"epochs=0 is out of range: pass a value"):
        host.train(NOT_A_STORE, head="h", set_name="s", labels="SELECT 1", epochs=0)
    with pytest.raises(InvalidParameterError, match="temperature="):
        host.distill(NOT_A_STORE, head="h", set_name="s", labels="x", params=DistillParams(0))
    with pytest.raises(UnknownKindError, match="pass one of word"):
        host.distill(NOT_A_STORE, head="h", set_name="s", labels="x", student="nosuch")
    with pytest.raises(InvalidParameterError, match="pass student='encoder'"):
        host.distill(NOT_A_STORE, head="h", set_name="s", labels="x", max_steps=3)


def test_an_unknown_keyword_is_named_with_what_to_pass_instead() -> None:
    with pytest.raises(InvalidParameterError, match=r"'epoch'.*epochs") as raised:
        host.train(NOT_A_STORE, head="h", set_name="s", labels="x", epoch=3)
    assert "store" not in raised.value.message.split("pass one of")[1]


def test_an_object_and_its_own_fields_are_not_both_given() -> None:
    with pytest.raises(InvalidParameterError, match="epochs given beside head_params="):
        host.train(
            NOT_A_STORE, head="h", set_name="s", labels="x", head_params=HeadParams(), epochs=3
        )
    with pytest.raises(InvalidParameterError, match="epochs given beside params="):
        host.train(NOT_A_STORE, head="h", set_name="s", labels="x", params=TrainParams(), epochs=3)


def test_a_tsql_null_is_the_fields_default_and_a_bad_value_is_numbered() -> None:
    frame = pd.DataFrame(columns=["item_key", "label", "logits", "vector"])
    _, number, message = sql_server_call(
        "distill", frame, student="head", temperature=None, teacher_classes_json="[]", dim=4
    )
    assert number == 50006  # no labelled rows: the call got past the door, defaults and all
    _, number, message = sql_server_call(
        "distill", frame, student="word", temperature=0.0, teacher_classes_json="[]"
    )
    assert number == InvalidParameterError.number and "temperature=0.0" in message


def test_sql_servers_door_refuses_what_a_verb_does_not_take_numbered() -> None:
    frame = pd.DataFrame(columns=["item_key", "label", "logits", "text"])
    _, number, message = sql_server_call(
        "distill", frame, student="word", teacher_classes_json="[]", max_length=64
    )
    assert number == 50012 and "max_length tunes the encoder student" in message
    _, number, message = sql_server_call("embed", frame, encoder_sha256="0" * 64, batch_size=0)
    assert number == 50012 and "batch_size=0 is out of range" in message
    _, number, message = sql_server_call("decide", frame, deploy="always", test_fraction=0.5)
    assert number == 50012 and "decide does not know parameter(s) 'test_fraction'" in message


def test_student_params_refuse_what_the_student_cannot_use() -> None:
    assert student_params("word", arch="bag") == WordStudentParams(arch="bag")
    assert student_params("word", arch="cnn").channels == 100  # the architecture's own size
    with pytest.raises(InvalidParameterError, match="student='word'"):
        student_params("tfidf", arch="bag")
    with pytest.raises(InvalidParameterError, match="pass bag, cnn"):
        student_params(arch="nosuch")
    # a device for a word student was ignored: refused now, naming the student that takes it
    with pytest.raises(InvalidParameterError, match="device tunes the encoder student"):
        student_params("word", device="cuda:3")
    with pytest.raises(InvalidParameterError, match="distill does not know parameter.*'dim'"):
        student_params("word", dim=32)  # a word student's size comes with its architecture
