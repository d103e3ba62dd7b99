"""``python -m bench [NAME|all] [--quick] [--scale full|quick|tiny] [--out DIR]``, NAME one of
encode, encoders, windows, load, train, score, deploy, accuracy, students, dial, active,
drift, demo, sidecar; ``all`` leaves out the GPU benchmarks (``sidecar``)."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from bench.common import GPU_ONLY, ORDER, SCALES, machine, save_section

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs"


def run_benchmark(name: str, out_dir: Path, scale: str) -> Path:
    """Run one benchmark and write its section (markdown, JSON, PNG) under ``out_dir``."""
    module = importlib.import_module(f"bench.{name}")
    started = time.perf_counter()
    section = module.run(out_dir, scale)
    section.seconds = time.perf_counter() - started
    section.machine = machine()
    return save_section(section, out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("benchmark", nargs="?", default="all", choices=[*ORDER, "all"])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--scale", choices=SCALES, help="full (default), quick or tiny")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: docs/")
    args = parser.parse_args(argv)
    scale = args.scale or ("quick" if args.quick else "full")
    names = [n for n in ORDER if n not in GPU_ONLY] if args.benchmark == "all" else [args.benchmark]
    for name in names:
        started = time.perf_counter()
        print(f"[bench] {name} ({scale}) ...", file=sys.stderr, flush=True)
        page = run_benchmark(name, args.out, scale)
        print(f"[bench] {name}: {time.perf_counter() - started:.0f} s -> {page}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
