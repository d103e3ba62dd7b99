"""What the README and the site promise a new user: the install CI runs, and blocks that run."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    return README[start : README.index("\n## ", start + 1)]


def test_install_says_how_to_get_the_cpu_only_torch_wheel():
    install = " ".join(_section("Install").split())
    assert "--index-url https://download.pytorch.org/whl/cpu" in install


def test_ci_runs_the_readme_install_and_test_commands_in_a_new_venv():
    """Issue 16: CI installed into the machine's own Python, so it passed where a new user's
    fresh install failed."""
    install = _section("Install")
    commands = install[
        install.index("```bash\n") + 8 : install.index("```", install.index("```bash") + 7)
    ]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    pip_lines = [line for line in commands.splitlines() if line.startswith("python3 -m pip ")]
    assert pip_lines[0] == "python3 -m pip install torch==2.13.0"  # torch first
    assert "-c constraints.txt" in pip_lines[1]
    assert [line for line in ci if line.startswith("python3 -m pip install ")][:2] == pip_lines
    assert 'rm -rf "$VENV"' in ci and 'python3 -m venv "$VENV"' in ci
    assert ci[-1] == "python3 -m pytest -q" and "python3 -m pytest -q" in _section("Tests")
    pinned = (ROOT / "constraints.txt").read_text()
    assert "\nonnxruntime==" in pinned and "\ntorch==" not in pinned


# -- the shell blocks of the README and of the site's pages, run in order (issue 20) -----------

# A fence may be indented (a block inside a list item, as in the DBA guide's steps): its lines
# are read without that indent, as Markdown reads them.
SHELL_BLOCK = re.compile(r"^( *)```(bash|sh)\n(.*?)^\1```", re.M | re.S)
# Blocks this test cannot run here, by a phrase they contain, and why.
NOT_HERE = {
    "docker compose": "needs Docker (the SQL Server stack)",
    "sqlcmd": "needs SQL Server",
    "SQLHEADS_MSSQL_URL": "needs SQL Server",
    "mssql+mssqlpython": "needs SQL Server",
    "--device cuda": "needs a GPU sidecar",
    "pip install": "installs packages (CI's fresh venv runs the install block)",
    "python3 -m pytest": "runs the test suite itself",
    "python -m bench": "a benchmark, measured in bench/",
    "python3 -m bench": "a benchmark, measured in bench/",
}


def _pages() -> list[str]:
    """The README, then every page of the site in the order of its navigation."""
    found: list[str] = []

    def walk(entry: object) -> None:
        if isinstance(entry, str):
            found.append(f"docs/{entry}")
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)
        elif isinstance(entry, list):
            for value in entry:
                walk(value)

    walk(yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_ConfigLoader)["nav"])
    return ["README.md", *found]


class _ConfigLoader(yaml.SafeLoader):
    """mkdocs.yml as data: a ``!!python/name:`` tag (the Mermaid fence's format function) is
    read as its name, never imported."""


_ConfigLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix
)


def _blocks() -> list[tuple[str, int, str]]:
    """(page, line, block) of every shell block, pages in reading order."""
    found = []
    for page in _pages():
        text = (ROOT / page).read_text(encoding="utf-8")
        for match in SHELL_BLOCK.finditer(text):
            indent = len(match.group(1))
            block = "".join(line[indent:] for line in match.group(3).splitlines(keepends=True))
            found.append((page, text.count("\n", 0, match.start()) + 1, block))
    return found


BLOCKS = _blocks()


def _why_not(block: str) -> str | None:
    """Why a block cannot run here, judged by its commands: a comment skips nothing."""
    code = "\n".join(line.split(" #")[0] for line in block.splitlines() if line[:1] != "#")
    for phrase, reason in NOT_HERE.items():
        if phrase in code:
            return reason
    return None


@pytest.fixture(scope="module")
def docs_dir(tmp_path_factory, demo_run) -> Path:
    """One directory for every page: the README's demo and quick start serve all of them. It
    starts with the demo's file from the suite's one full demo run (tests/conftest.py), so the
    README's demo blocks re-run it in place, as a user's second run."""
    folder = tmp_path_factory.mktemp("docs")
    shutil.copyfile(demo_run[1], folder / "sqlheads-demo.db")
    return folder


def _already_run(page: str, line: int, block: str) -> str | None:
    """Where an identical block ran before this one (Getting started repeats the README's)."""
    for other_page, other_line, other in BLOCKS:
        if (other_page, other_line) == (page, line):
            return None
        if other == block and _why_not(other) is None:
            return f"{other_page} line {other_line}"
    return None


@pytest.mark.parametrize(
    ("page", "line", "block"), BLOCKS, ids=[f"{page}:{line}" for page, line, _ in BLOCKS]
)
def test_shell_block_runs_as_written(docs_dir: Path, page: str, line: int, block: str):
    """Each block runs with bash -e in one directory, after the blocks above it, with the
    project's sqlheads first on PATH and SQLHEADS_SAMPLE_ROWS=2000 to keep it to minutes. A
    page starts from a fresh shell: an `export` holds for the blocks below it on its page."""
    reason = _why_not(block)
    if reason is not None:
        pytest.skip(f"{page} line {line}: {reason}")
    if (ran := _already_run(page, line, block)) is not None:
        pytest.skip(f"{page} line {line}: the same block ran at {ran}")
    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "SQLHEADS_SAMPLE_ROWS": "2000",
        # the CPU students' block asks its teacher for ${TRANSFER_ROWS:-12000} transfer rows
        # (each student's default): minutes of MPNet's on two cores; 300 keep the test's to seconds
        "TRANSFER_ROWS": "300",
        # the encoder student's dial distils ${LAYERS:-6 3 2}: minutes of fine-tuning MiniLM
        # three times on two cores, and a shallower depth's general stage first (30,000 or
        # 60,000 IMDB sentences, once per machine: minutes more); one depth runs the block's
        # every command, and the whole model's has no general stage (tests/test_general_stage.py
        # runs it)
        "LAYERS": "6",
    }
    env.pop("SQLHEADS_URL", None)
    exports = docs_dir / f".exports-{page.replace('/', '-')}"  # this page's shell
    shell = exports.name
    script = f"set -e\n[ -f {shell} ] && . ./{shell}\n{block}\nexport -p > {shell}\n"
    completed = subprocess.run(
        ["bash", "-c", script],
        cwd=docs_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, f"{page} line {line}:\n{completed.stderr[-3000:]}"
    assert exports.exists()
    assert "Traceback" not in completed.stderr


def _sqlheads_commands() -> list[tuple[str, list[str]]]:
    """(where, arguments) of every ``sqlheads`` command in the shell blocks, the skipped ones
    included; continuation lines and quoted strings over several lines joined, comments, ``&``
    and ``VAR=value`` prefixes dropped, ``${VAR:-default}`` read as its default and a ``for``
    loop's variable as its first value."""
    found = []
    for page, fence, block in BLOCKS:
        command, first, loops = "", 0, {}
        for offset, text in enumerate(block.splitlines(), start=fence + 1):
            if loop := re.match(
                r"\s*for (\w+) in (\S+)", re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", text)
            ):
                loops[loop.group(1)] = loop.group(2)
            command, first = command + " " + text.removesuffix("\\"), first or offset
            if text.endswith("\\"):
                continue
            for name, value in loops.items():
                command = re.sub(rf"\$\{{?{name}\b\}}?", value, command)
            try:
                words = shlex.split(re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", command), comments=True)
            except ValueError:  # a quoted string goes on over the next line, as bash reads it
                continue
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words = words[1:]
            if words and words[0] == "sqlheads":
                found.append((f"{page} line {first}", [w for w in words[1:] if w != "&"]))
            command, first = "", 0
    return found


def test_indented_blocks_are_read_too():
    """The DBA guide's deployment steps hold their blocks inside a list, indented: those
    commands (``sqlheads --url "mssql+..." init``) are parsed against the CLI as well."""
    parsed = [(where, args) for where, args in _sqlheads_commands() if "dba.md" in where]
    assert any(
        args[:1] == ["--url"] and args[1].startswith("mssql+") and "init" in args
        for _, args in parsed
    ), parsed
    pip = [b for page, _, b in BLOCKS if page.endswith("dba.md") and "pip install" in b]
    assert pip and all(not line.startswith(" " * 5) for b in pip for line in b.splitlines())


def test_every_sqlheads_command_in_the_docs_names_a_verb_and_options_that_exist():
    """The blocks a CPU cannot run (a GPU sidecar, SQL Server) are at least commands the CLI
    accepts: each is parsed as ``sqlheads`` would parse it, without running it."""
    import typer.main
    from typer.core import TyperGroup

    from sqlheads.cli import app

    group = typer.main.get_command(app)
    commands = _sqlheads_commands()
    assert len(commands) > 40, "the shell blocks' sqlheads commands were not found"
    for where, arguments in commands:
        context = group.context_class(group, info_name="sqlheads")
        try:  # the group's own options (its base's parse_args: no verb is run), then the verb's
            rest = super(TyperGroup, group).parse_args(context, list(arguments))
            name, verb, rest = group.resolve_command(context, rest)
            verb.make_context(name, rest, parent=context)
        except Exception as error:  # typer's own copy of click raises its own usage errors
            pytest.fail(f"{where}: sqlheads {' '.join(arguments)}: {error!r}")


def _columns_at_80(command: str, wide: bool) -> tuple[set[str], set[str]]:
    """(every column name of a listing, those it prints at 80 columns): keys and headers, as
    the tables of ``sqlheads.cli.tables`` rank them (the README's and cli.md's examples)."""
    from sqlheads.cli import tables

    def names(columns) -> set[str]:
        return {word for c in columns for word in (c.key, c.header, *c.header.split())}

    if command == "models":
        every = names(tables.MODELS_WIDE)
        return every, names(
            [c for c in tables.MODELS_WIDE if c.rank <= 6] if wide else tables.MODELS
        )
    every = names(tables.CATALOGUE) | names(tables.REGISTERED)
    shown = [c for c in (*tables.CATALOGUE, *tables.REGISTERED) if c.key not in (
        "rows_per_second", "accuracy", "parity_cosine")]  # fmt: skip
    return every, names(shown)


def test_a_block_comment_promises_only_columns_its_command_prints():
    """Issue 38: `sqlheads models  # kind, parameters, teacher, teacher_accuracy` named columns
    that 80 columns do not show. A comment after ``models`` or ``encoders`` names only columns
    the command prints at 80 columns, unless it says where the rest are (``--json``)."""
    promised = []
    for page, fence, block in BLOCKS:
        for offset, line in enumerate(block.splitlines(), start=fence + 1):
            found = re.match(r"\s*sqlheads\b(.*?)\b(models|encoders)\b(.*?)#(.*)", line)
            if found is None or "--json" in found.group(1) + found.group(3) + found.group(4):
                continue
            every, shown = _columns_at_80(found.group(2), "--wide" in found.group(3))
            words = {w.removesuffix("'s") for w in re.findall(r"[\w']+", found.group(4))}
            if hidden := sorted((words & every) - shown):
                promised.append(f"{page} line {offset}: {hidden} are not printed")
    assert promised == [], promised
