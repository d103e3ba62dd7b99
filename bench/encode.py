"""encode: sqlheads' ONNX encoder (int8 default, fp32) vs sentence-transformers on PyTorch.

Same texts (Rotten Tomatoes and IMDB samples), same model (all-MiniLM-L6-v2), 256-token
truncation on both sides (sentence-transformers' ``max_seq_length``), at 1 and 2 threads. Each
(path, threads) runs in a fresh process, so no thread pool of one path spins while another is
timed, and the Rust tokenizer gets the same thread count (``RAYON_RS_NUM_CPUS``). Also: where
the time goes (tokenizer vs model), FLOPs per row against this CPU's measured matmul peak, and a
head's accuracy on int8 vs fp32 vectors, and whether a text's vector depends on the batch it
is embedded in (issue 35), on this CPU and on one without VNNI (emulated, where QEMU is at hand).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bench.common import (
    Section,
    Table,
    fmt,
    pct,
    save_figure,
    seeded_subsample,
    timer,
)
from bench.int8_graphs import (
    PER_TENSOR,
    accuracy_tables,
    cpu_kind,
    encoder_graph,
    invariance_table,
    kernels_short,
)
from sqlheads.engine.encoders.catalog import DEFAULT_MODEL, catalog_encoder
from sqlheads.engine.encoders.onnx_encoder import (
    CPU_BATCH_TOKENS,
    DEFAULT_MAX_LENGTH,
    SessionTuning,
)
from sqlheads.report.figures import pyplot

BATCH_SIZE = 32


class Variant(NamedTuple):
    """One path through the benchmark: who encodes, which export, how it is batched and run."""

    implementation: str  # "sqlheads" or PEER
    quantization: str | None  # the export's, for sqlheads (or PER_TENSOR)
    batch_tokens: int | None  # padded tokens a batch holds at most (None: rows only)
    tuning: SessionTuning = SessionTuning()


PEER = "sentence-transformers"
VARIANTS: dict[str, Variant] = {
    "int8": Variant("sqlheads", "int8", CPU_BATCH_TOKENS),
    PER_TENSOR: Variant("sqlheads", PER_TENSOR, CPU_BATCH_TOKENS),
    "fp32": Variant("sqlheads", "none", CPU_BATCH_TOKENS),
    PEER: Variant(PEER, None, None),
    # onnxruntime's own session defaults, one at a time: what sqlheads' choices are worth here.
    "int8, spinning threads": Variant(
        "sqlheads", "int8", CPU_BATCH_TOKENS, SessionTuning(spin=True)
    ),
    "int8, SkipLayerNormalization": Variant(
        "sqlheads", "int8", CPU_BATCH_TOKENS, SessionTuning(disabled_optimizers=())
    ),
    "int8, 4,096-token batches": Variant("sqlheads", "int8", 4096),
}
PATHS = tuple(VARIANTS)
# invariance: RT texts embedded in every batching here; emulated: of them, under QEMU (slow).
SIZES: dict[str, dict[str, Any]] = {
    "full": {"rt": 1500, "imdb": 128, "threads": (1, 2), "rounds": 3, "head_rows": None,
             "matmul": 2048, "invariance": 400, "emulated": 100},
    "quick": {"rt": 300, "imdb": 24, "threads": (1, 2), "rounds": 2, "head_rows": None,
              "matmul": 1024, "invariance": 120, "emulated": 24},
    "tiny": {"rt": 40, "imdb": 4, "threads": (2,), "rounds": 1, "head_rows": 120,
             "matmul": 256, "paths": ("int8", "fp32", PEER), "profiled": ("int8",),
             "invariance": 16, "emulated": 0},
}  # fmt: skip
# The paths whose time per operator the section shows (onnxruntime's profiler).
PROFILED = ("int8", PER_TENSOR, "int8, SkipLayerNormalization", "fp32")
# The operators that quantise the rows of a product's input, in the default int8 graph.
QUANTISING = ("ReduceMax", "ReduceMin", "QuantizeLinear", "Max", "Flatten", "Expand")
# Done criteria at the largest thread count: the default int8 path against the peer.
TARGETS = {"Rotten Tomatoes": 4.0, "IMDB": 2.5}
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
    variant = VARIANTS[path]
    if variant.implementation == PEER:
        encode, batches = _sentence_transformers(threads, BATCH_SIZE, model)
    else:
        encode, batches = _sqlheads(variant, threads, model)
    encode(next(iter(samples.values()))[:BATCH_SIZE])  # warm-up: first-call allocations
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


def profile_path(path: str, threads: int, texts: list[str]) -> dict[str, float]:
    """Seconds per operator type of one sqlheads path over ``texts``, from onnxruntime's
    profiler; the warm-up run (one batch) is left out."""
    variant = VARIANTS[path]
    with tempfile.TemporaryDirectory() as tmp:
        tuning = variant.tuning._replace(profile_prefix=str(Path(tmp) / "profile"))
        encoder, _ = _onnx_encoder(variant._replace(tuning=tuning), threads, DEFAULT_MODEL)
        encoder.encode(texts[:1], long_text="truncate")  # one run: the warm-up
        encoder.encode(texts, long_text="truncate", batch_tokens=variant.batch_tokens)
        events = json.loads(Path(encoder.session.end_profiling()).read_text())
    runs = sorted((e["ts"], e["dur"]) for e in events if e.get("name") == "model_run")
    warm_up_end = runs[0][0] + runs[0][1]
    seconds: Counter[str] = Counter()
    for event in events:
        if (
            event.get("cat") == "Node"
            and event["name"].endswith("_kernel_time")
            and event["ts"] >= warm_up_end
        ):
            seconds[event["args"]["op_name"]] += event["dur"] / 1e6
    return dict(seconds)


def padded_tokens(texts: list[str], model: str = DEFAULT_MODEL) -> int:
    """Positions the default int8 path computes for ``texts`` (truncated), padding included."""
    from sqlheads.engine.encoders.onnx_encoder import Tokenizer, length_batches

    tokenizer_json = (catalog_encoder(model).model_dir() / "tokenizer.json").read_text()
    ids = Tokenizer(tokenizer_json, DEFAULT_MAX_LENGTH).encode(texts, truncate=True)
    lengths = np.array([len(i) for i in ids])
    order = np.argsort(lengths, kind="stable")
    batches = length_batches(order, lengths, BATCH_SIZE, VARIANTS["int8"].batch_tokens)
    return int(sum(len(b) * lengths[b].max() for b in batches))


Batches = Callable[[Sequence[str]], list[tuple[int, int, list[int]]]]


def _onnx_encoder(variant: Variant, threads: int, model: str):
    from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder

    artifact = encoder_graph(variant.quantization, model)
    encoder = OnnxEncoder(
        artifact.onnx,
        artifact.tokenizer_json,
        dim=artifact.dim,
        max_length=artifact.max_length,
        threads=threads,
        tuning=variant.tuning,
    )
    return encoder, artifact


def _sqlheads(variant: Variant, threads: int, model: str) -> tuple[Callable, Batches]:
    from sqlheads.engine.encoders.onnx_encoder import Tokenizer, length_batches

    encoder, artifact = _onnx_encoder(variant, threads, model)
    tokenizer = Tokenizer(artifact.tokenizer_json, artifact.max_length)

    def encode(texts: Sequence[str]) -> np.ndarray:
        return encoder.encode(
            texts, long_text="truncate", batch_size=BATCH_SIZE, batch_tokens=variant.batch_tokens
        ).vectors

    def batches(texts: Sequence[str]) -> list[tuple[int, int, list[int]]]:
        """The tokenizer's share of ``encode``: ids, length sort and padding, as it does."""
        ids = tokenizer.encode(texts, truncate=True)
        lengths = np.array([len(i) for i in ids])
        order = np.argsort(lengths, kind="stable")
        shapes = []
        for run in length_batches(order, lengths, BATCH_SIZE, variant.batch_tokens):
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
    paths = size.get("paths", PATHS)
    measured = measure_rounds(samples, size["threads"], size["rounds"], size["matmul"], paths)
    reference = max(size["threads"])
    profiles = {
        path: run_isolated(reference, profile_path, path, reference, samples["Rotten Tomatoes"])
        for path in size.get("profiled", PROFILED)
    }
    section = Section(
        name="encode",
        title="encode: ONNX encoder vs sentence-transformers",
        scale=scale,
        intro=(
            f"CPU: {cpu_kind()}. all-MiniLM-L6-v2 on the same texts: a seeded sample of "
            f"{len(samples['Rotten Tomatoes']):,} Rotten Tomatoes reviews and "
            f"{len(samples['IMDB']):,} IMDB reviews, batches of {BATCH_SIZE} rows (sqlheads: "
            f"and at most {CPU_BATCH_TOKENS:,} padded tokens, its default), truncated at 256 "
            "tokens on both sides (sentence-transformers' limit; sqlheads' default `window` "
            "mode embeds the rest of a long review too, which is more work and not compared "
            "here). sqlheads: `OnnxEncoder.encode` over the int8 export (the default: "
            "onnxruntime BERT fusions but the residual Add and LayerNormalization kept apart, "
            "7-bit weights per column, activations quantised row by row on scales of their "
            "own, so a text's vector does not depend on its batch), the same graph before "
            f"that (`{PER_TENSOR}`: onnxruntime's dynamic quantisation, one activation scale "
            "per tensor from the whole batch) and the fp32 export (the same fusions). "
            "Peer: `SentenceTransformer(default_model_dir(), device='cpu').encode` "
            "with `torch.set_num_threads(n)`. Each path and thread count runs in its own "
            "process, after a warm-up batch, tokenizer included; the whole set of runs is "
            f"repeated {size['rounds']} time(s), interleaved, and each rate is the best of its "
            "runs, each ratio to the peer the median of the rounds' ratios (with their range: "
            "this is a shared virtual machine whose speed drifts for minutes at a time, and "
            "interleaving spreads that drift over every path). The last three int8 paths undo "
            "one of sqlheads' choices each, to show what it is worth on this machine: "
            "onnxruntime's spinning pool threads (its default), onnxruntime's "
            "SkipLayerNormalization fusion (its default at session creation), batches of up to "
            "4,096 tokens (sqlheads' previous default)."
        ),
    )
    _speed_tables(section, samples, measured, size["threads"], paths)
    _profile_table(
        section,
        profiles,
        reference,
        padded_tokens(samples["Rotten Tomatoes"]),
        measured["peaks"][reference]["ort_int8"],
    )
    accuracy_tables(section, rt, size["head_rows"])
    invariance_table(section, rt, imdb, size["invariance"], size["emulated"])
    section.plots.append(_plot(out_dir, samples, measured["best"], size["threads"], paths))
    return section


def measure_rounds(
    samples: dict[str, list[str]],
    thread_counts: Sequence[int],
    rounds: int,
    matmul: int,
    paths: Sequence[str] = PATHS,
) -> dict[str, Any]:
    """Peaks and every (path, threads), ``rounds`` times interleaved: the best run of each
    (``best``), each round's rate against the peer's of the same round (``ratios``), and the
    load average at each round's end."""
    peaks: dict[int, dict[str, float]] = {}
    best: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    ratios: dict[tuple[str, int, str], list[float]] = {}
    loads = []
    for _ in range(rounds):
        for t in thread_counts:
            found = run_isolated(t, measure_peaks, t, matmul)
            peaks[t] = {k: max(v, peaks.get(t, {}).get(k, 0.0)) for k, v in found.items()}
            this_round = {path: run_isolated(t, measure_path, path, t, samples) for path in paths}
            for path, result in this_round.items():
                kept = best.setdefault((path, t), result)
                for data, m in result.items():
                    ratios.setdefault((path, t, data), []).append(
                        this_round[PEER][data]["seconds"] / m["seconds"]
                    )
                    if m["seconds"] < kept[data]["seconds"]:
                        kept[data] = m
        loads.append(os.getloadavg()[0])
    return {"peaks": peaks, "best": best, "ratios": ratios, "loads": loads}


def _ratio(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}x"
    return f"{np.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def _speed_tables(section, samples, found, thread_counts, paths) -> None:
    measured, peaks, ratios = found["best"], found["peaks"], found["ratios"]
    reference = max(thread_counts)
    kind = cpu_kind()
    speed = Table(
        f"Rows per second (higher is better) and cosine to sentence-transformers' vectors; "
        f"{kind}",
        ["data", "path", "threads", "rows/s", "x sentence-transformers, median (range)",
         "min cosine", "mean cosine"],
    )  # fmt: skip
    split = Table(
        f"Where the time goes, and how far from the arithmetic limit; {kind}",
        ["data", "path", "threads", "tokenizer share", "executed GFLOP/row",
         "padding overhead", "achieved GFLOP/s", "peak GFLOP/s (matmul)", "of peak"],
    )  # fmt: skip
    for data, texts in samples.items():
        peer_vectors = measured[(PEER, reference)][data]["vectors"]
        for t in thread_counts:
            peer_rate = len(texts) / measured[(PEER, t)][data]["seconds"]
            for path in paths:
                m = measured[(path, t)][data]
                rate = len(texts) / m["seconds"]
                cosine = np.sum(_unit(m["vectors"]) * _unit(peer_vectors), axis=1)
                speed.rows.append(
                    [data, path, str(t), fmt(rate), _ratio(ratios[(path, t, data)]),
                     f"{cosine.min():.6f}", f"{cosine.mean():.6f}"]
                )  # fmt: skip
                fp32_peak = max(peaks[t][k] for k in ("numpy_fp32", "torch_fp32", "ort_fp32"))
                is_int8 = VARIANTS[path].quantization in ("int8", PER_TENSOR)
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
        f"Measured matmul peak of this CPU (square matrices, best of 5); {kind}",
        ["threads", "NumPy fp32 GFLOP/s", "PyTorch fp32 GFLOP/s", "onnxruntime fp32 GFLOP/s",
         "onnxruntime int8 (U8S8) GOP/s"],
        [[str(t), fmt(p["numpy_fp32"]), fmt(p["torch_fp32"]), fmt(p["ort_fp32"]),
          fmt(p["ort_int8"])] for t, p in peaks.items()],
    )  # fmt: skip
    section.tables += [speed, split, peak_table]
    fp32 = measured[("fp32", reference)]["Rotten Tomatoes"]
    short = kernels_short()
    for data in samples:
        for t in sorted(thread_counts, reverse=True):
            int8 = measured[("int8", t)][data]
            section.headline.append(
                [
                    "encode",
                    f"{data} rows/s, {t} thread{'s' if t > 1 else ''}, {short}: sqlheads int8 "
                    "(default) vs sentence-transformers (ratio: median of rounds)",
                    f"{fmt(int8['rate'])} vs {fmt(int8['peer_rate'])} "
                    f"({_ratio(ratios[('int8', t, data)])})",
                ]
            )
    section.headline.append(
        ["encode", "fp32 export: min cosine to sentence-transformers", f"{fp32['min_cosine']:.6f}"]
    )
    loads = ", ".join(f"{load:.1f}" for load in found["loads"])
    for data, target in TARGETS.items():
        values = ratios[("int8", reference, data)]
        note = (
            f"Done criterion, {data}: the default int8 path at least {target:g}x "
            f"sentence-transformers at {reference} threads on this CPU ({short}): "
            f"{_ratio(values)}, {'met' if np.median(values) >= target else 'NOT met'}"
            f"; load average at the end of each round: {loads} on {os.cpu_count()} cores."
        )
        if 1 in thread_counts and reference > 1:
            single = np.median(ratios[("int8", 1, data)])
            peer = {t: measured[(PEER, t)][data]["peer_rate"] for t in (1, reference)}
            note += f" At 1 thread: {single:.2f}x."
            if peer[reference] < peer[1]:
                note += (
                    f" sentence-transformers ran slower at {reference} threads than at 1 "
                    f"({fmt(peer[reference])} vs {fmt(peer[1])} rows/s): PyTorch's threads lose "
                    "more to the other work on this machine than onnxruntime's, so here the "
                    "1-thread ratio is the fairer one."
                )
        section.notes.append(note + " The other CPU kind (without VNNI) is not measured here.")
    section.notes += [
        f"Done criterion, fp32 cosine to PyTorch at least 0.9999: {fp32['min_cosine']:.6f}, "
        + (
            "met."
            if fp32["min_cosine"] >= 0.9999
            else "NOT met: the export check should have refused this graph; compare tokenizer "
            "settings."
        ),
        "Arithmetic limit: executed FLOPs count the padded batches (the work the CPU does); "
        "`padding overhead` is how much of that is padding after length sorting. The int8 "
        "path is held against the int8 matmul peak although its attention products, "
        "softmax, GELU and layer norms stay fp32, so its share of peak is a lower bound; "
        "the operator table below shows where the rest of its time goes.",
        _long_text_note(measured, reference, len(samples["IMDB"]), paths),
    ]


def _long_text_note(measured, threads: int, rows: int, paths) -> str:
    long = {path: measured[(path, threads)]["IMDB"] for path in paths}
    others = ", ".join(
        f"{path} {fmt(long[path]['rate'], 1)}" for path in paths if path not in ("int8", PEER)
    )
    return (
        f"Long reviews (IMDB, {rows} texts, truncated at 256 tokens) at {threads} threads: "
        f"int8 (default) {fmt(long['int8']['rate'], 1)} rows/s, {others}, "
        f"sentence-transformers {fmt(long[PEER]['rate'], 1)}. At 256 positions attention "
        "(quadratic in length, fp32 in every path) weighs more against the int8 matmuls than "
        "on short reviews."
    )


def _profile_table(
    section: Section, profiles: dict[str, dict[str, float]], threads, tokens: int, peak: float
):
    """Seconds per operator type: where each graph's time goes, and what a fusion costs."""
    top: list[str] = []
    for seconds in profiles.values():  # each graph's six costliest, the default's first
        top += [op for op in sorted(seconds, key=seconds.get, reverse=True)[:6] if op not in top]
    table = Table(
        f"Where the time goes by operator: onnxruntime's profiler over the Rotten Tomatoes "
        f"sample ({tokens:,} padded positions), {threads} threads; {cpu_kind()}",
        ["operator", *[f"{path}: ms (share)" for path in profiles]],
    )
    for op in [*top, "other"]:
        row = [op]
        for seconds in profiles.values():
            value = (
                seconds.get(op, 0.0)
                if op != "other"
                else sum(v for k, v in seconds.items() if k not in top)
            )
            row.append(f"{fmt(1000 * value)} ({pct(value / sum(seconds.values()))})")
        table.rows.append(row)
    table.rows.append(
        ["all operators", *[fmt(1000 * sum(seconds.values())) for seconds in profiles.values()]]
    )
    section.tables.append(table)
    int8 = profiles["int8"]
    shape = model_shape()
    d, f, layers = shape["hidden"], shape["ffn"], shape["layers"]
    # MatMulIntegerToFloat multiplies by every weight: Q, K, V, attention output, feed-forward.
    product = int8.get("MatMulIntegerToFloat", 0.0)
    rate = 2 * tokens * layers * (4 * d * d + 2 * d * f) / product / 1e9 if product else 0.0
    quantising = sum(int8.get(op, 0.0) for op in QUANTISING)
    attention = int8.get("MultiHeadAttention", 0.0)
    total = sum(int8.values())
    note = (
        f"Operators, default int8 graph: MatMulIntegerToFloat {pct(product / total)} of the "
        f"operator time, at {fmt(rate)} GOP/s ({pct(rate / peak)} of this CPU's measured int8 "
        f"matmul peak, {fmt(peak)} GOP/s, the row scales applied included); quantising each "
        f"row of its inputs ({', '.join(QUANTISING)}) {pct(quantising / total)}; the fp32 "
        f"attention over 32-wide heads (MultiHeadAttention) {pct(attention / total)}; the rest "
        "(GELU, layer norms, adds) is fp32 throughout."
    )
    if PER_TENSOR in profiles:
        before = sum(profiles[PER_TENSOR].values())
        note += (
            f" The graph before issue 35 (one activation scale per tensor: "
            f"DynamicQuantizeMatMul, QAttention) took {fmt(1000 * before)} ms of operator time "
            f"against {fmt(1000 * total)} ms: batch invariance costs {pct(total / before - 1)} "
            "of it here."
        )
    if "int8, SkipLayerNormalization" in profiles:
        fused = profiles["int8, SkipLayerNormalization"].get("SkipLayerNormalization", 0.0)
        apart = sum(int8.get(op, 0.0) for op in ("LayerNormalization", "Add"))
        note += (
            " onnxruntime's CPU SkipLayerNormalization (a scalar loop with a division per "
            f"element) took {fmt(1000 * fused)} ms where the residual Add and LayerNormalization "
            f"kept apart take {fmt(1000 * apart)} ms."
        )
    section.notes.append(note)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _plot(out_dir: Path, samples, measured, thread_counts, paths) -> str:
    plt = pyplot()
    figure, axes = plt.subplots(1, len(samples), figsize=(5.2 * len(samples), 3.8))
    width = 0.8 / len(paths)
    for ax, (data, texts) in zip(np.atleast_1d(axes), samples.items(), strict=True):
        for i, path in enumerate(paths):
            rates = [len(texts) / measured[(path, t)][data]["seconds"] for t in thread_counts]
            x = np.arange(len(thread_counts)) + (i - (len(paths) - 1) / 2) * width
            bars = ax.bar(x, rates, width, label=path)
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks(np.arange(len(thread_counts)), [f"{t} thread(s)" for t in thread_counts])
        ax.set_ylabel("rows / s")
        ax.set_title(f"{data} ({len(texts):,} texts)")
        ax.legend(fontsize=8)
    figure.suptitle("all-MiniLM-L6-v2 on CPU: sqlheads ONNX vs sentence-transformers")
    return save_figure(figure, out_dir, "bench-encode.png")
