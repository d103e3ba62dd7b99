"""encode: sqlheads' ONNX encoder (int8 default, fp32) vs sentence-transformers on PyTorch.

Same texts (Rotten Tomatoes and IMDB samples), same model (all-MiniLM-L6-v2), 256-token
truncation on both sides (sentence-transformers' ``max_seq_length``), at 1 and 2 threads. Each
(path, threads) runs in a fresh process, so no thread pool of one path spins while another is
timed, and the Rust tokenizer gets the same thread count (``RAYON_RS_NUM_CPUS``). Also: where
the time goes (tokenizer vs model), FLOPs per row against this CPU's measured matmul peak, and a
head's accuracy on int8 vs fp32 vectors.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import (
    Section,
    Table,
    cached_vectors,
    fmt,
    pct,
    save_figure,
    seeded_subsample,
    timer,
)
from sqlheads.engine.catalog import DEFAULT_MODEL, catalog_encoder
from sqlheads.engine.encoder import DEFAULT_BATCH_TOKENS, DEFAULT_MAX_LENGTH
from sqlheads.report import pyplot

BATCH_SIZE = 32
# path -> (implementation, export quantization, batch size, token budget per batch)
VARIANTS: dict[str, tuple[str, str | None, int, int | None]] = {
    "int8": ("sqlheads", "int8", BATCH_SIZE, DEFAULT_BATCH_TOKENS),
    "fp32": ("sqlheads", "none", BATCH_SIZE, DEFAULT_BATCH_TOKENS),
    "sentence-transformers": ("sentence-transformers", None, BATCH_SIZE, None),
    "int8, 32 rows, no token budget": ("sqlheads", "int8", BATCH_SIZE, None),
    "int8, 2,048-token budget": ("sqlheads", "int8", BATCH_SIZE, 2048),
}
PATHS = tuple(VARIANTS)
PEER = "sentence-transformers"
QUANTIZATION = {"int8": "int8", "fp32": "none"}
SIZES: dict[str, dict[str, Any]] = {
    "full": {"rt": 1500, "imdb": 128, "threads": (1, 2), "rounds": 3, "head_rows": None,
             "matmul": 2048},
    "quick": {"rt": 300, "imdb": 24, "threads": (1, 2), "rounds": 1, "head_rows": 3000,
              "matmul": 1024},
    "tiny": {"rt": 40, "imdb": 4, "threads": (2,), "rounds": 1, "head_rows": 300,
             "matmul": 256},
}  # fmt: skip
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# ---------------------------------------------------------------------------------------------
# Arithmetic


def model_shape(model: str = DEFAULT_MODEL) -> dict[str, int]:
    config = json.loads((catalog_encoder(model).model_dir() / "config.json").read_text())
    return {
        "hidden": int(config["hidden_size"]),
        "ffn": int(config["intermediate_size"]),
        "layers": int(config["num_hidden_layers"]),
    }


def batch_flops(rows: int, width: int, shape: dict[str, int]) -> float:
    """FLOPs of one padded (rows, width) batch through the encoder's layers.

    Per layer and sequence: Q, K, V and output projections (4 L d^2 multiply-adds), the
    feed-forward pair (2 L d f) and attention's two L x L products (2 L^2 d); 2 FLOPs per
    multiply-add. Embedding look-ups, softmax, layer norms and pooling are left out (< 2 %).
    """
    d, f, n_layers = shape["hidden"], shape["ffn"], shape["layers"]
    macs = 4 * width * d * d + 2 * width * d * f + 2 * width * width * d
    return 2.0 * rows * n_layers * macs


# ---------------------------------------------------------------------------------------------
# Workers: each runs in a fresh process with its thread count fixed in the environment


def run_isolated(threads: int, function: Callable[..., Any], *args: Any) -> Any:
    """Run ``function(*args)`` in a new interpreter limited to ``threads`` threads."""
    env = {name: str(threads) for name in THREAD_VARIABLES}
    env |= {"RAYON_RS_NUM_CPUS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            return pool.submit(function, *args).result()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def measure_peaks(threads: int, size: int, repeats: int = 5) -> dict[str, float]:
    """Best GFLOP/s (GOP/s for int8) of a square matmul: NumPy, PyTorch, onnxruntime."""
    import onnxruntime as ort
    import torch
    from onnx import TensorProto, helper
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    work = 2.0 * size**3

    def best(call: Callable[[], Any]) -> float:
        call()
        times = []
        for _ in range(repeats):
            with timer() as elapsed:
                call()
            times.append(elapsed[0])
        return work / min(times) / 1e9

    with threadpool_limits(limits=threads):
        numpy_fp32 = best(lambda: a @ b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    torch_fp32 = best(lambda: ta @ tb)

    def ort_matmul(op: str, a_type: int, b_type: int, out_type: int, feeds: dict) -> float:
        graph = helper.make_graph(
            [helper.make_node(op, ["a", "b"], ["c"])],
            "peak",
            [
                helper.make_tensor_value_info("a", a_type, [size, size]),
                helper.make_tensor_value_info("b", b_type, [size, size]),
            ],
            [helper.make_tensor_value_info("c", out_type, [size, size])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        return best(lambda: session.run(None, feeds))

    ort_fp32 = ort_matmul(
        "MatMul", TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.FLOAT, {"a": a, "b": b}
    )
    # Dynamic quantisation runs activations as uint8 and weights as int8 (U8S8), as here.
    ua = rng.integers(0, 255, (size, size), dtype=np.uint8)
    sb = rng.integers(-127, 127, (size, size), dtype=np.int8)
    ort_int8 = ort_matmul(
        "MatMulInteger", TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32, {"a": ua, "b": sb}
    )
    return {
        "numpy_fp32": numpy_fp32,
        "torch_fp32": torch_fp32,
        "ort_fp32": ort_fp32,
        "ort_int8": ort_int8,
    }


def measure_path(
    path: str, threads: int, samples: dict[str, list[str]], model: str = DEFAULT_MODEL
) -> dict[str, dict[str, Any]]:
    """Encode each sample with one path of a catalogue model: seconds, tokenizer seconds,
    executed and useful FLOPs, and the vectors."""
    shape = model_shape(model)
    implementation, quantization, batch_size, batch_tokens = VARIANTS[path]
    if implementation == PEER:
        encode, batches = _sentence_transformers(threads, batch_size, model)
    else:
        encode, batches = _sqlheads(quantization, threads, batch_size, batch_tokens, model)
    encode(next(iter(samples.values()))[:batch_size])  # warm-up: first-call allocations
    results = {}
    for name, texts in samples.items():
        with timer() as elapsed:
            vectors = encode(texts)
        with timer() as tokenize:
            shapes = batches(texts)
        results[name] = {
            "seconds": elapsed[0],
            "tokenize_seconds": tokenize[0],
            "flops_executed": sum(batch_flops(r, w, shape) for r, w, _ in shapes),
            "flops_useful": sum(
                batch_flops(1, length, shape) for _, _, lengths in shapes for length in lengths
            ),
            "vectors": np.asarray(vectors, dtype=np.float32),
        }
    return results


Batches = Callable[[Sequence[str]], list[tuple[int, int, list[int]]]]


def _sqlheads(
    quantization: str, threads: int, batch_size: int, batch_tokens: int | None, model: str
) -> tuple[Callable, Batches]:
    from bench.common import onnx_encoder
    from sqlheads.engine.encoder import Tokenizer, length_batches
    from sqlheads.engine.export import export_encoder

    artifact = export_encoder(catalog_encoder(model).model_dir(), quantization=quantization)
    encoder = onnx_encoder(artifact, threads)
    tokenizer = Tokenizer(artifact.tokenizer_json, artifact.max_length)

    def encode(texts: Sequence[str]) -> np.ndarray:
        return encoder.encode(
            texts, long_text="truncate", batch_size=batch_size, batch_tokens=batch_tokens
        ).vectors

    def batches(texts: Sequence[str]) -> list[tuple[int, int, list[int]]]:
        """The tokenizer's share of ``encode``: ids, length sort and padding, as it does."""
        ids = tokenizer.encode(texts, truncate=True)
        lengths = np.array([len(i) for i in ids])
        order = np.argsort(lengths, kind="stable")
        shapes = []
        for run in length_batches(order, lengths, batch_size, batch_tokens):
            chunk = [ids[i] for i in run]
            padded, _ = tokenizer.pad(chunk)
            shapes.append((padded.shape[0], padded.shape[1], [len(c) for c in chunk]))
        return shapes

    return encode, batches


def _sentence_transformers(threads: int, batch_size: int, name: str) -> tuple[Callable, Batches]:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(str(catalog_encoder(name).model_dir()), device="cpu")
    model.max_seq_length = DEFAULT_MAX_LENGTH  # MiniLM's own limit; MPNet's is 384

    def encode(texts: Sequence[str]) -> np.ndarray:
        return model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True)

    def batches(texts: Sequence[str]) -> list[tuple[int, int, list[int]]]:
        """What ``encode`` tokenizes: batches sorted by text length, padded per batch."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        shapes = []
        for start in range(0, len(order), batch_size):
            features = model.preprocess([texts[i] for i in order[start : start + batch_size]])
            mask = features["attention_mask"]
            shapes.append((mask.shape[0], mask.shape[1], mask.sum(dim=1).tolist()))
        return shapes

    return encode, batches


# ---------------------------------------------------------------------------------------------


def run(out_dir: Path, scale: str = "full") -> Section:
    from sqlheads import datasets

    size = SIZES[scale]
    rt, imdb = datasets.rotten_tomatoes(), datasets.imdb()
    samples = {
        "Rotten Tomatoes": seeded_subsample(rt, size["rt"])["text"].tolist(),
        "IMDB": seeded_subsample(imdb, size["imdb"])["text"].tolist(),
    }
    peaks, measured = measure_rounds(samples, size["threads"], size["rounds"], size["matmul"])
    section = Section(
        name="encode",
        title="encode: ONNX encoder vs sentence-transformers",
        scale=scale,
        intro=(
            "all-MiniLM-L6-v2 on the same texts: a seeded sample of "
            f"{len(samples['Rotten Tomatoes']):,} Rotten Tomatoes reviews and "
            f"{len(samples['IMDB']):,} IMDB reviews, batches of {BATCH_SIZE} rows (sqlheads: "
            f"and at most {DEFAULT_BATCH_TOKENS:,} padded tokens, its default), truncated at 256 "
            "tokens on both sides (sentence-transformers' limit; sqlheads' default `window` "
            "mode embeds the rest of a long review too, which is more work and not compared "
            "here). sqlheads: `OnnxEncoder.encode` over the int8 export (the default: "
            "onnxruntime BERT fusions + per-channel dynamic int8) and the fp32 export (fusions "
            "only). Peer: `SentenceTransformer(default_model_dir(), device='cpu').encode` with "
            "`torch.set_num_threads(n)`. Each path and thread count runs in its own process, "
            "after a warm-up batch, tokenizer included; the whole set of runs is repeated "
            f"{size['rounds']} time(s), interleaved, and each figure is the best of its runs "
            "(this is a shared virtual machine whose speed drifts for minutes at a time: "
            "interleaving spreads that drift over every path). `int8, 32 rows, no token "
            "budget` is the default export batched by rows only (the previous default) and "
            "`int8, 2,048-token budget` a tighter budget, to show what the budget is worth."
        ),
    )
    _speed_tables(section, samples, measured, peaks, size["threads"])
    _accuracy_table(section, rt, size["head_rows"])
    section.plots.append(_plot(out_dir, samples, measured, size["threads"]))
    return section


def measure_rounds(
    samples: dict[str, list[str]], thread_counts: Sequence[int], rounds: int, matmul: int
) -> tuple[dict[int, dict[str, float]], dict[tuple[str, int], dict[str, dict[str, Any]]]]:
    """Peaks and every (path, threads), ``rounds`` times interleaved; the best of each."""
    peaks: dict[int, dict[str, float]] = {}
    measured: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for _ in range(rounds):
        for t in thread_counts:
            found = run_isolated(t, measure_peaks, t, matmul)
            peaks[t] = {k: max(v, peaks.get(t, {}).get(k, 0.0)) for k, v in found.items()}
            for path in PATHS:
                result = run_isolated(t, measure_path, path, t, samples)
                best = measured.setdefault((path, t), result)
                for data, m in result.items():
                    if m["seconds"] < best[data]["seconds"]:
                        best[data] = m
    return peaks, measured


def _speed_tables(section, samples, measured, peaks, thread_counts) -> None:
    reference = max(thread_counts)
    speed = Table(
        "Rows per second (higher is better), cosine to sentence-transformers' vectors",
        ["data", "path", "threads", "rows/s", "x sentence-transformers", "min cosine",
         "mean cosine"],
    )  # fmt: skip
    split = Table(
        "Where the time goes, and how far from the arithmetic limit",
        ["data", "path", "threads", "tokenizer share", "executed GFLOP/row",
         "padding overhead", "achieved GFLOP/s", "peak GFLOP/s (matmul)", "of peak"],
    )  # fmt: skip
    for data, texts in samples.items():
        peer_vectors = measured[(PEER, reference)][data]["vectors"]
        for t in thread_counts:
            peer_rate = len(texts) / measured[(PEER, t)][data]["seconds"]
            for path in PATHS:
                m = measured[(path, t)][data]
                rate = len(texts) / m["seconds"]
                cosine = np.sum(_unit(m["vectors"]) * _unit(peer_vectors), axis=1)
                speed.rows.append(
                    [data, path, str(t), fmt(rate), f"{rate / peer_rate:.2f}x",
                     f"{cosine.min():.6f}", f"{cosine.mean():.6f}"]
                )  # fmt: skip
                fp32_peak = max(peaks[t][k] for k in ("numpy_fp32", "torch_fp32", "ort_fp32"))
                is_int8 = VARIANTS[path][1] == "int8"
                peak = peaks[t]["ort_int8"] if is_int8 else fp32_peak
                achieved = m["flops_executed"] / m["seconds"] / 1e9
                split.rows.append(
                    [data, path, str(t), pct(m["tokenize_seconds"] / m["seconds"]),
                     f"{m['flops_executed'] / len(texts) / 1e9:.3f}",
                     pct(m["flops_executed"] / m["flops_useful"] - 1, 0),
                     fmt(achieved, 1), f"{fmt(peak)} ({'int8' if is_int8 else 'fp32'})",
                     pct(achieved / peak)]
                )  # fmt: skip
                m["rate"], m["peer_rate"] = rate, peer_rate
                m["min_cosine"] = float(cosine.min())
                m["of_peak"] = achieved / peak
    peak_table = Table(
        "Measured matmul peak of this CPU (square matrices, best of 5)",
        ["threads", "NumPy fp32 GFLOP/s", "PyTorch fp32 GFLOP/s", "onnxruntime fp32 GFLOP/s",
         "onnxruntime int8 (U8S8) GOP/s"],
        [[str(t), fmt(p["numpy_fp32"]), fmt(p["torch_fp32"]), fmt(p["ort_fp32"]),
          fmt(p["ort_int8"])] for t, p in peaks.items()],
    )  # fmt: skip
    section.tables += [speed, split, peak_table]
    int8 = measured[("int8", reference)]["Rotten Tomatoes"]
    fp32 = measured[("fp32", reference)]["Rotten Tomatoes"]
    ratio = int8["rate"] / int8["peer_rate"]
    section.headline += [
        ["encode", f"Rotten Tomatoes rows/s, {reference} threads: sqlheads int8 (default) vs "
         "sentence-transformers",
         f"{fmt(int8['rate'])} vs {fmt(int8['peer_rate'])} ({ratio:.2f}x)"],
        ["encode", "fp32 export: min cosine to sentence-transformers",
         f"{fp32['min_cosine']:.6f}"],
    ]  # fmt: skip
    section.notes += [
        f"Done criterion, sqlheads' default path at least 2x sentence-transformers on "
        f"{reference} cores: {ratio:.2f}x, "
        + ("met." if ratio >= 2 else _shortfall_note(measured, peaks, thread_counts)),
        f"Done criterion, fp32 cosine to PyTorch at least 0.9999: {fp32['min_cosine']:.6f}, "
        + (
            "met."
            if fp32["min_cosine"] >= 0.9999
            else "NOT met: the export check should "
            "have refused this graph; compare tokenizer settings."
        ),
        "Arithmetic limit: executed FLOPs count the padded batches (the work the CPU does); "
        "`padding overhead` is how much of that is padding after length sorting. The int8 "
        "path is held against the int8 matmul peak although its attention products, "
        "softmax, GELU and layer norms stay fp32, so its share of peak is a lower bound. "
        f"On short reviews the default path reaches {pct(int8['of_peak'])} of the int8 peak "
        f"at {reference} threads; what is not arithmetic is tokenizing (the `tokenizer share`), "
        "per-batch framework overhead and memory-bound operators.",
        _long_text_note(measured, reference, len(samples["IMDB"])),
    ]


def _long_text_note(measured, threads: int, rows: int) -> str:
    long = {path: measured[(path, threads)]["IMDB"] for path in PATHS}
    short = measured[("int8", threads)]["Rotten Tomatoes"]
    long_ratio = long["int8"]["rate"] / long["int8"]["peer_rate"]
    short_ratio = short["rate"] / short["peer_rate"]
    budgets = ", ".join(
        f"{path} {fmt(long[path]['rate'], 1)}"
        for path in ("int8, 32 rows, no token budget", "int8, 2,048-token budget")
    )
    return (
        f"Long reviews (IMDB, {rows} texts, truncated at 256 tokens) at {threads} threads: "
        f"int8 (default, {DEFAULT_BATCH_TOKENS:,}-token budget) "
        f"{fmt(long['int8']['rate'], 1)} rows/s, {budgets}, fp32 "
        f"{fmt(long['fp32']['rate'], 1)}, sentence-transformers {fmt(long[PEER]['rate'], 1)}: "
        f"the default path is {long_ratio:.2f}x the peer here against {short_ratio:.2f}x on "
        "short reviews. Done criterion (issue 11), IMDB at least 2.5x sentence-transformers "
        f"at {threads} threads: "
        + (
            "met."
            if long_ratio >= 2.5
            else "NOT met. At 256 positions attention (quadratic in length, fused but fp32 in "
            "every path), layer norms and GELU weigh more against the int8 matmuls than on "
            "short reviews; a token budget keeps batches cache-sized but does not remove that "
            "work. Still to measure: shorter windows (128 tokens, pooled) at equal head accuracy."
        )
    )


def _shortfall_note(measured, peaks, thread_counts) -> str:
    """Why the default path is not 2x the peer, from this run's own figures."""
    rt = "Rotten Tomatoes"
    lines = []
    for t in thread_counts:
        m = {path: measured[(path, t)][rt] for path in PATHS}
        lines.append(
            f"at {t} thread(s) int8 {fmt(m['int8']['rate'])} rows/s "
            f"({m['int8']['rate'] / m['int8']['peer_rate']:.2f}x), sentence-transformers "
            f"{fmt(m['int8']['peer_rate'])} rows/s"
        )
    low, high = min(thread_counts), max(thread_counts)
    scaling = ""
    if low != high:
        fp32 = peaks[high]["torch_fp32"] / peaks[low]["torch_fp32"]
        int8 = peaks[high]["ort_int8"] / peaks[low]["ort_int8"]
        scaling = (
            f" Going from {low} to {high} threads multiplied this machine's measured matmul "
            f"peak by {fp32:.2f} (fp32) and {int8:.2f} (int8): its virtual cores do not add "
            "up like physical ones (shared core or neighbours), and onnxruntime's int8 "
            "kernels suffer from that more than PyTorch's fp32 ones."
        )
    return (
        "NOT met: " + "; ".join(lines) + "." + scaling + " The int8 path runs at a small share "
        "of the int8 peak (table above): on short reviews a batch of 32 is a few dozen tokens "
        "wide, so operator dispatch, dynamic quantisation of activations and the fp32 parts "
        "of the graph (attention, softmax, GELU, layer norms) weigh as much as the int8 "
        "matmuls. What would close it: static int8 quantisation with calibrated "
        "activation scales, a dedicated physical core per thread, or a smaller distilled "
        "student for scoring; measure each here before believing it."
    )


def _accuracy_table(section: Section, rt, head_rows: int | None) -> None:
    """A head and logistic regression on int8 vs fp32 vectors of the fixed RT split."""
    from sklearn.linear_model import LogisticRegression

    from sqlheads.engine.heads import HeadClassifier

    frame = seeded_subsample(rt, head_rows)
    train, test = frame["split"] == "train", frame["split"] == "test"
    y = frame["label"].to_numpy()
    accuracy: dict[tuple[str, str], float] = {}
    for path in ("int8", "fp32"):
        X, _ = cached_vectors("rt", QUANTIZATION[path], frame["text"].tolist())
        head = HeadClassifier().fit(X[train], y[train])
        accuracy[("head", path)] = float(np.mean(head.predict(X[test]) == y[test]))
        lr = LogisticRegression(max_iter=1000).fit(X[train], y[train])
        accuracy[("lr", path)] = float(np.mean(lr.predict(X[test]) == y[test]))
    table = Table(
        f"Accuracy on int8 vs fp32 vectors: fixed Rotten Tomatoes split ({int(train.sum()):,} "
        f"train / {int(test.sum()):,} test rows)",
        ["classifier", "fp32 vectors", "int8 vectors", "difference (points)"],
    )
    for name, label in (("head", "sqlheads head (MLP, defaults)"), ("lr", "logistic regr.")):
        diff = 100 * (accuracy[(name, "int8")] - accuracy[(name, "fp32")])
        table.rows.append(
            [label, pct(accuracy[(name, "fp32")]), pct(accuracy[(name, "int8")]), f"{diff:+.1f}"]
        )
    section.tables.append(table)
    diff = 100 * abs(accuracy[("head", "int8")] - accuracy[("head", "fp32")])
    section.headline.append(
        ["encode", "head accuracy on int8 vs fp32 vectors (Rotten Tomatoes)",
         f"{pct(accuracy[('head', 'int8')])} vs {pct(accuracy[('head', 'fp32')])}"]
    )  # fmt: skip
    section.notes.append(
        f"Done criterion, head accuracy on int8 vectors within 0.5 point of fp32: {diff:.1f} "
        + (
            "point(s), met."
            if diff <= 0.5
            else "points, NOT met: on a split this size one "
            "point is a few dozen reviews; rerun with other seeds before blaming int8."
        )
    )


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _plot(out_dir: Path, samples, measured, thread_counts) -> str:
    plt = pyplot()
    figure, axes = plt.subplots(1, len(samples), figsize=(5.2 * len(samples), 3.8))
    width = 0.8 / len(PATHS)
    for ax, (data, texts) in zip(np.atleast_1d(axes), samples.items(), strict=True):
        for i, path in enumerate(PATHS):
            rates = [len(texts) / measured[(path, t)][data]["seconds"] for t in thread_counts]
            x = np.arange(len(thread_counts)) + (i - (len(PATHS) - 1) / 2) * width
            bars = ax.bar(x, rates, width, label=path)
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks(np.arange(len(thread_counts)), [f"{t} thread(s)" for t in thread_counts])
        ax.set_ylabel("rows / s")
        ax.set_title(f"{data} ({len(texts):,} texts)")
        ax.legend(fontsize=8)
    figure.suptitle("all-MiniLM-L6-v2 on CPU: sqlheads ONNX vs sentence-transformers")
    return save_figure(figure, out_dir, "bench-encode.png")
