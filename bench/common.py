"""What every benchmark shares: scales, the machine, results on disk, plots, a vector cache.

Each benchmark returns a :class:`Section`; :func:`save_section` merges it into
``benchmarks.json`` (the numbers, one entry per benchmark) and renders ``benchmarks.md`` from
all entries, so running one benchmark updates its own section and leaves the others as they
were measured.
"""

from __future__ import annotations

import atexit
import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sqlheads.engine.encoders.onnx_encoder import int8_kernels
from sqlheads.report.figures import pyplot

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from disk; the hub is unreachable

SCALES = ("full", "quick", "tiny")
ORDER = (
    "encode", "encoders", "windows", "load", "train", "score", "deploy", "accuracy", "students",
    "dial", "active", "drift", "demo", "sidecar",
)  # fmt: skip
# Benchmarks of the GPU sidecar: `all` leaves them out (on a CPU they would take hours); run
# them by name on a GPU machine (`python -m bench sidecar`).
GPU_ONLY = ("sidecar",)
PACKAGES = (
    "sqlheads",
    "numpy",
    "torch",
    "onnxruntime",
    "tokenizers",
    "transformers",
    "sentence-transformers",
    "scikit-learn",
    "SQLAlchemy",
    "matplotlib",
)
REPRODUCE = "python -m bench all"


@dataclass
class Table:
    """One markdown table: a caption, column names and rows of already-formatted cells."""

    caption: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class Section:
    """A benchmark's results as they go into ``benchmarks.md``."""

    name: str
    title: str
    scale: str
    intro: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    # (what, figure) rows for the summary at the top of the page.
    headline: list[list[str]] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------
# The machine


def scratch_dir(prefix: str) -> Path:
    """A folder for one benchmark's files (SQLite files, checkpoints, exports), removed when
    the process ends: a teacher's work folder alone is hundreds of megabytes."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The instruction-set extensions that decide encoder speed, as /proc/cpuinfo lists them."""
    interesting = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return [f for f in interesting if f in flags]
    except OSError:
        pass
    return []


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    versions = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {
        "gpu": gpu_model(),
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "int8_kernels": int8_kernels(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "versions": versions,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # Other work on a shared machine slows every figure: the page says how much there was.
        "load_average": [round(v, 1) for v in os.getloadavg()],
    }


def gpu_model() -> str | None:
    """The CUDA GPU a benchmark could use, if torch is loaded and sees one."""
    import sys

    torch = sys.modules.get("torch")  # never imported for this: CPU benchmarks stay light
    if torch is None or not torch.cuda.is_available():
        return None
    return f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"


def machine_line(m: dict[str, Any]) -> str:
    flags = ", ".join(m.get("cpu_flags", [])) or "none of note"
    load = m.get("load_average")
    busy = (
        f"; load average {load[0]} / {load[1]} / {load[2]} (1 / 5 / 15 min) at the end"
        if load
        else ""
    )
    gpu = f"{m['gpu']}; " if m.get("gpu") else ""
    # Which int8 kernels onnxruntime runs decides int8 speed: named outright, not left to flags.
    kernels = f"; int8 kernels: {m['int8_kernels']}" if m.get("int8_kernels") else ""
    return (
        f"{gpu}{m['cpu']} ({flags}{kernels}), {m['cores']} cores, {m['memory_gib']} GiB, "
        f"{m['os']}; measured {m['date']}{busy}"
    )


# ---------------------------------------------------------------------------------------------
# Results on disk


def save_section(section: Section, out_dir: Path) -> Path:
    """Merge ``section`` into ``benchmarks.json`` and re-render ``benchmarks.md``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    store = out_dir / "benchmarks.json"
    results = json.loads(store.read_text()) if store.is_file() else {}
    results[section.name] = asdict(section)
    store.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    page = out_dir / "benchmarks.md"
    page.write_text(render(results))
    return page


def render(results: dict[str, dict]) -> str:
    sections = [results[name] for name in ORDER if name in results]
    lines = [
        "# Benchmarks",
        "",
        "Every figure below was measured by `bench/` on the machine named under each section, "
        "side by side with the tool a user would otherwise pick. Nothing here is typed in by "
        f"hand: reproduce it all with `{REPRODUCE}` (about 20 minutes on 2 cores), or one "
        f"benchmark with `python -m bench {'|'.join(n for n in ORDER if n not in GPU_ONLY)}` "
        "(add `--quick` for small sizes). The GPU sidecar's benchmark runs on a GPU machine, "
        "by name: `python -m bench sidecar`. The numbers are also in `benchmarks.json`.",
        "",
    ]
    if sections:
        latest = max(sections, key=lambda s: s["machine"].get("date", ""))["machine"]
        versions = ", ".join(f"{k} {v}" for k, v in latest["versions"].items())
        lines += [f"**Machine**: {machine_line(latest)}.", "", f"**Versions**: {versions}.", ""]
        lines += ["## Headline", "", headline_table(sections), ""]
    for section in sections:
        lines += render_section(section)
    return "\n".join(lines).rstrip() + "\n"


def headline_table(sections: Sequence[dict]) -> str:
    rows = [row for section in sections for row in section["headline"]]
    return markdown_table(["benchmark", "what", "figure"], rows)


def render_section(section: dict) -> list[str]:
    lines = [f"## {section['title']}", ""]
    scale = "" if section["scale"] == "full" else f" Scale: **{section['scale']}** (not full)."
    lines += [
        f"_{machine_line(section['machine'])}; took {section['seconds']:.0f} s._{scale}",
        "",
        section["intro"],
        "",
    ]
    for table in section["tables"]:
        lines += [f"**{table['caption']}**", "", markdown_table(table["columns"], table["rows"])]
        lines.append("")
    for plot in section["plots"]:
        lines += [f"![{section['name']}]({plot})", ""]
    for note in section["notes"]:
        lines += [f"- {note}"]
    if section["notes"]:
        lines.append("")
    return lines


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Formatting, timing, plotting


def fmt(value: float, digits: int = 0) -> str:
    """Thousands separators, fixed decimals: 12,345 or 0.93."""
    return f"{value:,.{digits}f}"


def pct(value: float, digits: int = 1) -> str:
    return f"{100 * value:.{digits}f} %"


@contextmanager
def timer() -> Iterator[list[float]]:
    """``with timer() as t: ...`` then ``t[0]`` holds the elapsed seconds and ``t[1]`` the
    CPU seconds of this process (all its threads), which other load inflates much less."""
    elapsed = [0.0, 0.0]
    started, cpu = time.perf_counter(), time.process_time()
    try:
        yield elapsed
    finally:
        elapsed[0] = time.perf_counter() - started
        elapsed[1] = time.process_time() - cpu


def save_figure(figure, out_dir: Path, name: str) -> str:
    """Write a PNG under ``out_dir``; returns its name relative to the markdown page."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(out_dir / name, dpi=110)
    pyplot().close(figure)
    return name


# ---------------------------------------------------------------------------------------------
# Vectors cached by content, so that `all` embeds each text set once


def vector_cache_path(tag: str, encoder_sha256: str, texts: Sequence[str], mode: str) -> Path:
    from sqlheads.engine.encoders.onnx_encoder import cache_dir

    digest = hashlib.sha256(f"{encoder_sha256}:{mode}".encode())
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return cache_dir() / "bench" / f"{tag}-{digest.hexdigest()[:20]}.npy"


def cached_vectors(
    tag: str,
    quantization: str,
    texts: Sequence[str],
    mode: str = "window",
    threads: int = 2,
    model: str | None = None,
) -> tuple[np.ndarray, float | None]:
    """Vectors of ``texts`` with a catalogue model's ``quantization`` export (the default's
    when ``model`` is None).

    Returns the vectors and the seconds encoding took, or None when they came from the cache.
    """
    from sqlheads.engine.encoders.catalog import DEFAULT_MODEL, catalog_encoder
    from sqlheads.engine.encoders.export import export_encoder

    model_dir = catalog_encoder(model or DEFAULT_MODEL).model_dir()
    artifact = export_encoder(model_dir, quantization=quantization)
    path = vector_cache_path(tag, artifact.sha256, texts, mode)
    if path.is_file():
        return np.load(path), None
    encoder = onnx_encoder(artifact, threads)
    with timer() as elapsed:
        vectors = encoder.encode(list(texts), long_text=mode).vectors
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(staging, vectors)
    staging.replace(path)
    return vectors, elapsed[0]


def onnx_encoder(artifact, threads: int):
    """An :class:`OnnxEncoder` over an export artifact, through the engine's sha256 cache."""
    from sqlheads.engine.encoders.onnx_encoder import EncoderRef, load_encoder

    encoder = EncoderRef(
        artifact.sha256,
        onnx=artifact.onnx,
        tokenizer_json=artifact.tokenizer_json,
        dim=artifact.dim,
        max_length=artifact.max_length,
    )
    return load_encoder(encoder, threads=threads)


def seeded_subsample(frame, rows: int | None, seed: int = 0):
    """A fixed, seeded subsample keeping each row's split (all rows when ``rows`` is None)."""
    if rows is None or rows >= len(frame):
        return frame.reset_index(drop=True)
    return frame.sample(n=rows, random_state=seed).sort_index().reset_index(drop=True)
