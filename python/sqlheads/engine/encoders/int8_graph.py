"""Batch-invariant int8: each row of a weight MatMul's input is quantised on a scale of its own.

onnxruntime's dynamic quantisation (``quantize_dynamic``: DynamicQuantizeMatMul, QAttention)
takes one activation scale per *tensor*, from the minimum and maximum of the whole batch,
padding included, so a text's int8 vector depended on which texts shared its batch (issue 35:
cosine 0.965 at worst between batchings of the same text). Here every row of a MatMul's input
(one token's activations) is quantised on its own symmetric scale, computed in the graph: the
row's largest magnitude over 127, zero point 128, so onnxruntime keeps its u8 x s8 kernels (VNNI
where the CPU has it). The integer product is exact and the row's and the column's scales are
applied after it, so a row's output depends on that row alone: the same bits alone, in any
batch, beside any padding. A row rounded on its own range is also rounded more finely than on
the batch's: all-MiniLM-L6-v2's vectors came closer to fp32 (mean cosine 0.9949 against 0.9905
per tensor, Rotten Tomatoes), and all-mpnet-base-v2's feed-forward outputs, whose outliers a
per-tensor scale flattened, run int8 too.

The chosen form, by measurement (AMD EPYC with AVX-512 VNNI, shared and loaded, so by
interleaved ratios): per product, ReduceMax and ReduceMin over the row, QuantizeLinear with one
block per row (opset 21), ``MatMulIntegerToFloat`` with the per-column weight scales, then a Mul
by the row scales. One MatMul of MiniLM's shapes (512 rows, 1 thread) ran at 0.91-0.94 of the
fused per-tensor DynamicQuantizeMatMul; the whole of MiniLM at 0.94 (Rotten Tomatoes) and 0.95
(IMDB) of the per-tensor graph's rows per CPU-second. Opset 17's per-axis QuantizeLinear (on the
rows of a flattened matrix) and the kernel's own A scale cost the same at 1 thread but run on
one thread whatever the session's count (onnxruntime loops over the rows; its
``MatMulIntegerToFloat`` scales its output rows serially), where the blocked QuantizeLinear and
a Mul split the rows between threads. Abs + ReduceMax was no faster; onnxruntime's MatMulNBits
with 8-bit weights and int8 compute (blocks of 32 or 128) ran at a third to a half. A fused
Attention becomes three int8 projections that share one quantised input and a
MultiHeadAttention (which adds their bias and masks as Attention does): cheaper than
QAttention's projections and attention together, which leaves room for the quantising.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper, version_converter

MS_DOMAIN = "com.microsoft"
# QuantizeLinear takes a scale per block of a row from opset 21 on, and runs the rows in
# parallel; before, a scale per row meant a matrix of rows quantised one after another.
# onnxruntime runs it from 1.19 (1.18 refuses the blocks; pyproject.toml's floor).
ROWS_OPSET = 21
# Symmetric activations: a row's values map to [-128, 127] around the zero point 128 in u8.
ZERO_POINT = 128
# 7-bit weights (+-64): on x86 CPUs without VNNI onnxruntime sums u8 x s8 products in pairs in
# int16 (VPMADDUBSW), which saturates once 255 x (|w1| + |w2|) passes 32,767; within +-64 it
# never does, so the integer products are the same on every kind of x86 CPU.
WEIGHT_LEVELS = 64
# GELU(x) = x * Phi(x) is never under -0.16997: a GELU output's row needs no minimum, its
# scale covers this floor (one pass over the widest activations saved).
GELU_OPS = ("Gelu", "BiasGelu", "FastGelu")
GELU_FLOOR = 0.1701
# A fused Attention whose inputs or attributes go beyond a self-attention with a padding mask
# stays float: MultiHeadAttention would not compute the same thing.
ATTENTION_ATTRIBUTES = {"num_heads", "scale", "mask_filter_value", "unidirectional"}


def quantize_rows(onnx_bytes: bytes, exclude: re.Pattern[str] | None = None) -> bytes:
    """Every product by a stored weight (MatMul, and the Q/K/V projections of a fused
    Attention) in int8 with per-row activation scales; nodes whose name ``exclude`` matches
    stay float. Products of two activations (attention scores) stay float."""
    model = onnx.load_from_string(onnx_bytes)
    if _opset(model) < ROWS_OPSET:
        model = version_converter.convert_version(model, ROWS_OPSET)
    graph = model.graph
    rewriter = _Rewriter(
        weights={init.name: init for init in graph.initializer},
        producers={output: node for node in graph.node for output in node.output},
    )
    for node in graph.node:
        if exclude is not None and exclude.search(node.name):
            rewriter.nodes.append(node)
        elif node.op_type == "MatMul" and rewriter.is_weight(node.input[1]):
            rewriter.matmul(node.input[0], node.input[1], node.output[0], node.name)
        elif node.op_type == "Attention" and node.domain == MS_DOMAIN and _plain(node, rewriter):
            rewriter.attention(node)
        else:
            rewriter.nodes.append(node)
    used = {name for node in rewriter.nodes for name in node.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.node[:], graph.initializer[:]
    graph.node.extend(rewriter.nodes)
    graph.initializer.extend(kept + list(rewriter.constants.values()))
    if not any(opset.domain == MS_DOMAIN for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return model.SerializeToString()


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def quantize_weight(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per output column, symmetric: int8 values within +-:data:`WEIGHT_LEVELS` and the
    column scales (1 for a column of zeros)."""
    peak = np.abs(weight).max(axis=0)
    scale = np.where(peak > 0, peak / WEIGHT_LEVELS, 1.0).astype(np.float32)
    values = np.clip(np.round(weight / scale), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int8)
    return values, scale


def _plain(node: onnx.NodeProto, rewriter: _Rewriter) -> bool:
    """A self-attention with stored Q/K/V weights and at most a padding mask."""
    attributes = {a.name for a in node.attribute}
    return (
        len([name for name in node.input[4:] if name]) == 0
        and attributes <= ATTENTION_ATTRIBUTES
        and rewriter.is_weight(node.input[1])
        and rewriter.is_weight(node.input[2])
    )


@dataclass
class _Rewriter:
    weights: dict[str, onnx.TensorProto]
    producers: dict[str, onnx.NodeProto]
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    constants: dict[str, onnx.TensorProto] = field(default_factory=dict)
    # activation -> (its u8 rows, their scales): Q, K and V of an unfused attention share one
    rows_of: dict[str, tuple[str, str]] = field(default_factory=dict)

    def is_weight(self, name: str) -> bool:
        return name in self.weights and len(self.weights[name].dims) in (1, 2)

    def constant(self, name: str, value: np.ndarray) -> str:
        if name not in self.constants:
            self.constants[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def matmul(self, activation: str, weight: str, output: str, name: str) -> None:
        self.product(activation, numpy_helper.to_array(self.weights[weight]), weight, output, name)

    def product(
        self, activation: str, weight: np.ndarray, weight_name: str, output: str, name: str
    ) -> None:
        rows, row_scales = self.rows(activation, weight.shape[0])
        values, column_scales = quantize_weight(weight.astype(np.float32))
        self.nodes += [
            helper.make_node(
                "MatMulIntegerToFloat",
                [
                    rows,
                    self.constant(f"{weight_name}_int8", values),
                    self.constant("int8_rows_one", np.float32(1)),
                    self.constant(f"{weight_name}_int8_scale", column_scales),
                    self.constant("int8_rows_zero_point", np.array(ZERO_POINT, np.uint8)),
                ],
                [f"{output}_unscaled"],
                name=f"{name}_int8",
                domain=MS_DOMAIN,
            ),
            # Mul runs the rows in parallel (the kernel's own A scale would not)
            helper.make_node("Mul", [f"{output}_unscaled", row_scales], [output]),
        ]

    def rows(self, activation: str, width: int) -> tuple[str, str]:
        """``activation`` (rows of ``width``) quantised row by row, once however many products
        read it: the u8 tensor (its shape) and the row scales (shape ``(..., 1)``)."""
        if activation in self.rows_of:
            return self.rows_of[activation]
        name = f"{activation}_rows"
        last = self.constant("int8_rows_last_axis", np.array([-1], np.int64))
        above = self.constant("int8_rows_above", np.float32(1 / (255 - ZERO_POINT)))
        self.nodes += [
            helper.make_node("ReduceMax", [activation, last], [f"{name}_max"], keepdims=1),
            helper.make_node("Mul", [f"{name}_max", above], [f"{name}_above"]),
        ]
        producer = self.producers.get(activation)
        if producer is not None and producer.op_type in GELU_OPS:
            below = self.constant("int8_rows_gelu_floor", np.float32(GELU_FLOOR / ZERO_POINT))
        else:
            below = f"{name}_below"
            self.nodes += [
                helper.make_node("ReduceMin", [activation, last], [f"{name}_min"], keepdims=1),
                helper.make_node(
                    "Mul",
                    [f"{name}_min", self.constant("int8_rows_below", np.float32(-1 / ZERO_POINT))],
                    [below],
                ),
            ]
        tiny = self.constant("int8_rows_tiny", np.float32(1e-30))  # a row of zeros
        zero_point = self.constant("int8_rows_zero_point", np.array(ZERO_POINT, np.uint8))
        self.nodes += [
            helper.make_node("Max", [f"{name}_above", below, tiny], [f"{name}_scale"]),
            helper.make_node("Shape", [f"{name}_scale"], [f"{name}_count"]),
            helper.make_node("Expand", [zero_point, f"{name}_count"], [f"{name}_zero_points"]),
            # one block per row: the row's scale and zero point
            helper.make_node(
                "QuantizeLinear",
                [activation, f"{name}_scale", f"{name}_zero_points"],
                [f"{name}_u8"],
                axis=-1,
                block_size=width,
            ),
        ]
        self.rows_of[activation] = (f"{name}_u8", f"{name}_scale")
        return self.rows_of[activation]

    def attention(self, node: onnx.NodeProto) -> None:
        """A fused Attention as three int8 projections of one quantised input and a
        MultiHeadAttention, which adds the projections' bias and applies the mask."""
        x, weight, bias, mask = (list(node.input) + [""] * 4)[:4]
        packed = numpy_helper.to_array(self.weights[weight])
        width = packed.shape[1] // 3
        parts = [f"{node.name}_{part}" for part in "qkv"]
        for i, part in enumerate(parts):
            self.product(
                x, packed[:, i * width : (i + 1) * width], f"{weight}_{'qkv'[i]}", part, part
            )
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self.nodes.append(
            helper.make_node(
                "MultiHeadAttention",
                [*parts, bias, mask],
                list(node.output),
                name=f"{node.name}_heads",
                domain=MS_DOMAIN,
                **attributes,
            )
        )
