"""The int8 graphs ``python -m bench encode`` compares: what each loses against fp32, and whether
a text's vector depends on the batch it is embedded in (issue 35).

The same texts are embedded alone, shuffled in batches of 8, in the encoder's length-sorted
batches of 32 and, natively, each beside a 256-token review (padding); a text's vectors should
be the same in each. ``python -m bench encode`` reports it per CPU kind (this machine, and one
without VNNI emulated by QEMU: :mod:`bench.emulated`) for the default int8 graph, the int8 graph
before (:data:`PER_TENSOR`) and fp32.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from bench.batchings import batchings
from bench.common import (
    Section,
    Table,
    cached_vectors,
    cpu_model,
    onnx_encoder,
    pct,
    seeded_subsample,
)
from bench.emulated import cosine
from sqlheads.engine.encoders.catalog import DEFAULT_MODEL, catalog_encoder
from sqlheads.engine.encoders.onnx_encoder import int8_kernels

# The int8 graph before issue 35: onnxruntime's dynamic quantisation, one activation scale per
# tensor from the whole batch (DynamicQuantizeMatMul, QAttention), built here from the fp32 export
# as engine/encoders/export.py built it then; what batch invariance costs is measured against it.
PER_TENSOR = "int8, per-tensor scales (before)"
# The graphs compared: name -> export quantization (or PER_TENSOR).
GRAPHS = {"int8": "int8", PER_TENSOR: PER_TENSOR, "fp32": "none"}
QUANTIZATION = {"int8": "int8", "fp32": "none"}
ACCURACY_TARGET_POINTS = 0.5


def batch_invariance(found: dict[str, np.ndarray]) -> dict[str, float]:
    """From :func:`batchings`: the least and the mean cosine between a text's vectors in any two
    batchings, and the share of texts whose vectors are the same bits in all."""
    vectors = list(found.values())
    pairs = [cosine(a, b) for i, a in enumerate(vectors) for b in vectors[i + 1 :]]
    least = np.min(pairs, axis=0)
    same = np.all([np.all(v == vectors[0], axis=1) for v in vectors[1:]], axis=0)
    return {"min": float(least.min()), "mean": float(least.mean()), "identical": float(same.mean())}


def encoder_graph(quantization: str, model: str = DEFAULT_MODEL):
    """The export (an ``EncoderArtifact``) of ``quantization``: ``int8``, ``none`` or
    :data:`PER_TENSOR`, this last built from the fp32 export once and kept in the cache."""
    from sqlheads.engine.encoders.export import export_encoder
    from sqlheads.engine.encoders.onnx_encoder import cache_dir

    model_dir = catalog_encoder(model).model_dir()
    if quantization != PER_TENSOR:
        return export_encoder(model_dir, quantization=quantization)
    fp32 = export_encoder(model_dir, quantization="none")
    path = cache_dir() / "bench" / f"per-tensor-int8-{fp32.sha256[:16]}.onnx"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_suffix(f".{os.getpid()}.tmp")
        staging.write_bytes(per_tensor_int8(fp32.onnx))
        staging.replace(path)
    return dataclasses.replace(fp32, onnx=path.read_bytes(), quantization=PER_TENSOR)


def per_tensor_int8(onnx_bytes: bytes) -> bytes:
    """onnxruntime's dynamic quantisation as engine/encoders/export.py ran it before issue 35:
    per-channel 7-bit weights, activations on one scale per tensor taken from the whole batch."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from sqlheads.engine.encoders.export import without_preprocessing_advice

    with tempfile.TemporaryDirectory() as tmp, without_preprocessing_advice():
        source, target = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        source.write_bytes(onnx_bytes)
        quantize_dynamic(
            str(source),
            str(target),
            per_channel=True,
            reduce_range=True,
            weight_type=QuantType.QInt8,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        return target.read_bytes()


def invariance_table(section: Section, rt, imdb, rows: int, emulated_rows: int) -> None:
    """Issue 35: the same texts embedded alone, shuffled in batches of 8, in length-sorted
    batches of 32 and (natively) each beside a 256-token review; the least cosine of a text's
    vectors between any two batchings, per CPU kind and graph."""
    from bench.emulated import CPU_MODEL, embed_emulated
    from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder

    # one line each for the emulated process
    texts = [" ".join(t.split()) for t in seeded_subsample(rt, rows)["text"]]
    long = imdb["text"][imdb["text"].str.len() > 3000].iloc[0]
    kinds = {f"this machine: {int8_kernels()}": None}
    if emulated_rows and shutil.which("qemu-x86_64"):
        kinds[f"no VNNI (emulated: qemu-x86_64 -cpu {CPU_MODEL}, AVX2)"] = emulated_rows
    table = Table(
        "Batch invariance: the least cosine between one text's vectors in any two batchings "
        "(alone; shuffled, batches of 8; length-sorted, batches of 32; natively also beside a "
        "256-token review) and the texts whose vectors are the same bits in all",
        ["CPU kind", "graph", "texts", "least cosine", "mean of each text's least",
         "same bits"],
    )  # fmt: skip
    found: dict[tuple[str, str], float] = {}
    for kind, emulated in kinds.items():
        for path, quantization in GRAPHS.items():
            artifact = encoder_graph(quantization)
            if emulated:
                figures = batch_invariance(embed_emulated(artifact, texts[:emulated], batched=True))
            else:
                encoder = OnnxEncoder(
                    artifact.onnx, artifact.tokenizer_json, dim=artifact.dim,
                    max_length=artifact.max_length, threads=2,
                )  # fmt: skip
                figures = batch_invariance(batchings(encoder, texts, long))
            found[(kind, path)] = figures["min"]
            table.rows.append(
                [kind, path, f"{emulated or len(texts):,}", f"{figures['min']:.6f}",
                 f"{figures['mean']:.6f}", pct(figures["identical"])]
            )  # fmt: skip
    section.tables.append(table)
    other = len(kinds) > 1
    summary = " / ".join(f"{found[(kind, 'int8')]:.6f}" for kind in kinds)
    section.headline.append(
        ["encode", "least cosine of a text's int8 vectors across batchings (this machine"
         + (" / emulated without VNNI)" if other else ")"), summary]
    )  # fmt: skip
    worst = min(found[(kind, "int8")] for kind in kinds)
    section.notes.append(
        f"Done criterion, batch invariance: a text's int8 vectors within cosine 0.99999 "
        f"whatever its batch, on {' and '.join(kinds)}: least {worst:.6f}, "
        + ("met." if worst >= 0.99999 else "NOT met.")
        + ("" if other else " The CPU kind without VNNI is not measured here (no qemu-x86_64 "
           "or a tiny run): python -m bench.emulated runs it.")
    )  # fmt: skip


def cpu_kind() -> str:
    """The CPU and which int8 kernels it runs: every encode figure is labelled with it."""
    return f"{cpu_model()}, int8 kernels: {int8_kernels()}"


def kernels_short() -> str:
    return int8_kernels().split(" (")[0]


def accuracy_tables(section: Section, rt, head_rows: int | None) -> None:
    """A head and logistic regression on int8 vs fp32 vectors of the fixed RT split, and the
    graph each CPU kind gets."""
    from sklearn.linear_model import LogisticRegression

    from sqlheads.engine.encoders.export import export_encoder, int8_decision, weight_matmuls
    from sqlheads.engine.encoders.onnx_encoder import VNNI_FLAGS
    from sqlheads.engine.heads import HeadClassifier

    frame = seeded_subsample(rt, head_rows)
    train, test = frame["split"] == "train", frame["split"] == "test"
    y = frame["label"].to_numpy()
    accuracy: dict[tuple[str, str], float] = {}
    vectors = {}
    for path in ("int8", "fp32", PER_TENSOR):
        if path == PER_TENSOR:  # not an export: its vectors are not cached
            old = encoder_graph(PER_TENSOR)
            X = onnx_encoder(old, 2).encode(frame["text"].tolist()).vectors
        else:
            X, _ = cached_vectors("rt", QUANTIZATION[path], frame["text"].tolist())
        vectors[path] = X
        head = HeadClassifier().fit(X[train], y[train])
        accuracy[("head", path)] = float(np.mean(head.predict(X[test]) == y[test]))
        lr = LogisticRegression(max_iter=1000).fit(X[train], y[train])
        accuracy[("lr", path)] = float(np.mean(lr.predict(X[test]) == y[test]))
    split = f"{int(train.sum()):,} train / {int(test.sum()):,} test rows"
    table = Table(
        f"Accuracy on int8 vs fp32 vectors: fixed Rotten Tomatoes split ({split}); {cpu_kind()}",
        ["classifier", "fp32 vectors", "int8 vectors", "difference (points)",
         f"{PER_TENSOR} vectors", "its difference"],
    )  # fmt: skip
    for name, label in (("head", "sqlheads head (MLP, defaults)"), ("lr", "logistic regr.")):
        fp32 = accuracy[(name, "fp32")]
        table.rows.append(
            [label, pct(fp32), pct(accuracy[(name, "int8")]),
             f"{100 * (accuracy[(name, 'int8')] - fp32):+.1f}", pct(accuracy[(name, PER_TENSOR)]),
             f"{100 * (accuracy[(name, PER_TENSOR)] - fp32):+.1f}"]
        )  # fmt: skip
    section.tables.append(table)
    to_fp32 = cosine(vectors["int8"], vectors["fp32"])
    before = cosine(vectors[PER_TENSOR], vectors["fp32"])
    int8 = export_encoder(quantization="int8")
    quantised, left_float = weight_matmuls(int8.onnx)
    decision = int8_decision(int8.onnx)
    here, vnni = kernels_short(), kernels_short() == "VNNI"
    matmuls = f"{quantised} int8 / {left_float} float ({decision.decided_by if decision else '?'})"
    kinds = Table(
        f"The int8 graph each CPU kind gets (all-MiniLM-L6-v2), Rotten Tomatoes ({split})",
        ["CPU kind", "weight MatMuls", "cosine to fp32: mean (min)", "head accuracy int8 vs fp32"],
        [
            [f"this machine: {int8_kernels()}", matmuls,
             f"{to_fp32.mean():.4f} ({to_fp32.min():.4f})",
             f"{pct(accuracy[('head', 'int8')])} vs {pct(accuracy[('head', 'fp32')])}"],
            [f"this machine, the graph before ({PER_TENSOR})",
             "{} int8 / {} float".format(*weight_matmuls(old.onnx)),
             f"{before.mean():.4f} ({before.min():.4f})",
             f"{pct(accuracy[('head', PER_TENSOR)])} vs {pct(accuracy[('head', 'fp32')])}"],
            [f"{'no VNNI (AVX2, AVX-512F)' if vnni else 'VNNI (' + ', '.join(VNNI_FLAGS) + ')'}: "
             "not measured here", f"the same: {matmuls}",
             PREVIOUS_OTHER_KIND if vnni else "not measured here", "not measured here"],
        ],
    )  # fmt: skip
    section.tables.append(kinds)
    diff = 100 * abs(accuracy[("head", "int8")] - accuracy[("head", "fp32")])
    section.headline.append(
        ["encode", f"head accuracy on int8 vs fp32 vectors (Rotten Tomatoes, {split}; {here})",
         f"{pct(accuracy[('head', 'int8')])} vs {pct(accuracy[('head', 'fp32')])}"]
    )  # fmt: skip
    section.notes += [
        f"Done criterion, head accuracy on int8 vectors within {ACCURACY_TARGET_POINTS:g} point "
        f"of fp32's on {split}: {diff:.2f} point(s), "
        + ("met." if diff <= ACCURACY_TARGET_POINTS else "NOT met."),
        "CPU kinds: the graph is the same on every CPU (the encoder catalogue decides which "
        "MatMuls are int8, not a measurement on the exporting machine). Its weights are 7-bit, "
        "so the u8 x s8 products summed in int16 pairs on a CPU without VNNI cannot saturate "
        "(255 x 128 < 32,768; tests/test_engine_encoder.py reads that from the graph): its "
        "int8 products are the same integers there; fp32 operators (GELU, softmax, layer "
        "norms) may round differently. Its speed there is not measured here.",
    ]


# What is known of a CPU without VNNI: no such machine is at hand, but its kernels run emulated.
PREVIOUS_OTHER_KIND = (
    "not measured natively here; emulated (python -m bench.emulated: QEMU's Haswell, AVX2 "
    "kernels) on the held-out rows: docs/benchmarking.md, CPUs with and without VNNI"
)
