"""Every benchmark at tiny sizes, into a temporary directory, so that none can rot.

Speed is never asserted here: this checks that each benchmark runs and writes its section of
the markdown page, its numbers and a real PNG.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: bench/

from bench.__main__ import main, run_benchmark  # noqa: E402
from bench.common import ORDER, Section, Table, save_section  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize("name", ORDER)
def test_benchmark_runs_at_tiny_sizes(name: str, tmp_path: Path):
    page = run_benchmark(name, tmp_path, "tiny")

    text = page.read_text()
    results = json.loads((tmp_path / "benchmarks.json").read_text())
    section = results[name]
    assert f"## {section['title']}" in text
    assert "Scale: **tiny**" in text and "cores" in text and "onnxruntime" in text
    assert section["headline"] and all(len(row) == 3 for row in section["headline"])
    for table in section["tables"]:
        assert table["rows"], table["caption"]
        assert all(len(row) == len(table["columns"]) for row in table["rows"])
        assert "nan" not in json.dumps(table["rows"]).lower()
    assert section["plots"]
    for plot in section["plots"]:
        assert f"]({plot})" in text
        assert (tmp_path / plot).read_bytes()[:8] == PNG


def test_a_section_replaces_its_own_part_and_keeps_the_others(tmp_path: Path):
    def section(name: str, figure: str) -> Section:
        return Section(
            name=name,
            title=f"{name} title",
            scale="tiny",
            intro="intro",
            tables=[Table("caption", ["a", "b"], [["1", figure]])],
            headline=[[name, "what", figure]],
            machine={"cpu": "cpu", "cores": 2, "memory_gib": 1, "os": "os",
                     "date": "2026-01-01 00:00 UTC", "versions": {"numpy": "x"}},
        )  # fmt: skip

    save_section(section("load", "first"), tmp_path)
    save_section(section("train", "kept"), tmp_path)
    page = save_section(section("load", "second"), tmp_path).read_text()
    assert "second" in page and "first" not in page and "kept" in page
    assert page.index("## load title") < page.index("## train title")  # fixed order


def test_every_students_size_names_every_setting_the_run_reads():
    """A size the tiny run does not exercise (``dial``) still names each setting: issue 39's
    dial run failed after 42 minutes of distilling, at its speed step, on a missing key."""
    from bench.students import SIZES

    for name, size in SIZES.items():
        assert set(size) == set(SIZES["full"]), name


def test_the_command_line_refuses_an_unknown_benchmark():
    with pytest.raises(SystemExit):
        main(["nonsense"])


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU: the defect is in a CUDA-only branch (first seen on an H100)",
)
def test_peak_gpu_memory_resets_in_a_process_that_has_not_touched_cuda_yet():
    import subprocess

    # A fresh process: resetting the statistics before any allocation was "Invalid device
    # argument", and crashed `python -m bench sidecar` at once.
    code = "import torch; from bench.sidecar import reset_peak_memory as r; r(torch.device('cuda'))"
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, timeout=300)
