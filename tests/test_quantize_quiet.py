"""First use exports the encoder quietly: onnxruntime's advice to pre-process before
quantisation is not printed (issue 20, point 4). A real two-MatMul graph, really quantised."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from sqlheads.engine.encoders.export import without_preprocessing_advice

ADVICE = "pre-processing before quantization"


def _graph(path) -> None:
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.normal(size=(8, 8)).astype(np.float32), f"w{i}")
        for i in range(2)
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h"], name="first"),
        helper.make_node("MatMul", ["h", "w1"], ["y"], name="second"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("quiet", [False, True])
def test_quantisation_advice_is_silenced(tmp_path, caplog, quiet: bool):
    source, target = tmp_path / "fp32.onnx", tmp_path / "int8.onnx"
    _graph(source)
    with caplog.at_level(logging.WARNING):
        if quiet:
            with without_preprocessing_advice():
                quantize_dynamic(source, target, weight_type=QuantType.QInt8)
        else:
            quantize_dynamic(source, target, weight_type=QuantType.QInt8)
    assert target.stat().st_size > 0
    advised = any(ADVICE in record.getMessage() for record in caplog.records)
    assert advised is not quiet  # onnxruntime still advises; the export's calls do not
