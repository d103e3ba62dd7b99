"""students: a frozen all-mpnet-base-v2 head teaches on the CPU; students beside the baseline.

Rotten Tomatoes with the fixed 80/20 split of ``sqlheads.datasets``, everything through the
embedded host on a fresh SQLite file, as ``sqlheads embed`` / ``train`` / ``distill
--teacher-head`` / ``predict`` do. The teacher is a head on frozen all-mpnet-base-v2 int8
vectors (no GPU anywhere); it labels the students' rows (from the vectors its set stored) and
the transfer rows built from the training rows (sentences of long rows, augmented copies:
masking, replacement by encoder neighbours, n-gram sampling), which are cached so that every
later student reuses them. Each student is scored against the teacher on the same held-out
rows, beside the TF-IDF baseline and the frozen heads, and every path's scoring speed is
measured in the same run. The curve (accuracy against transfer rows, per word-student
architecture) reads the one cached transfer set. Where the shared logits of the GPU teacher
``mpnet-rt`` are at hand, the default word student is also distilled from them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bench.common import Section, Table, fmt, pct, save_figure, scratch_dir, seeded_subsample
from bench.dial import dial_headline, dial_table, distill_dial
from sqlheads.engine.students.word.architectures import NAMES
from sqlheads.report.figures import pyplot

SPEED_ROUNDS = 3
# A round repeats a model's pass over the texts until it has scored for this long: a student's
# single pass (about 0.1 s) moved by a quarter between two runs of the same architecture.
MIN_ROUND_SECONDS = 1.0
SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "rt": None,
        "teacher_model": "all-mpnet-base-v2",
        "curve": (0, 6_000, 12_000, 24_000, 48_000),
        "archs": NAMES,  # every registered architecture
        # the kind's default transfer rows (cached by then) and epochs (3), at each depth
        "encoder_student": {"transfer_rows": None},
        "layers": (6, 3, 2, 1),
        "imdb": None,
        "speed": (SPEED_ROUNDS, MIN_ROUND_SECONDS),
    },
    "quick": {
        "rt": 2_000,
        "teacher_model": "all-mpnet-base-v2",
        "curve": (0, 2_000, 5_000),
        "archs": ("bag", "cnn"),
        "encoder_student": {"transfer_rows": 1_000, "epochs": 1},
        "layers": (3, 2),
        "imdb": 2_000,
        "speed": (SPEED_ROUNDS, MIN_ROUND_SECONDS),
    },
    # The full data and the encoder student's dial at its defaults, each depth with and
    # without the feature loss, the word students cut to the default (its rows and none):
    # about an hour on two quiet cores; `python -m bench dial`'s full scale, in its own section.
    "dial": {
        "rt": None,
        "teacher_model": "all-mpnet-base-v2",
        "curve": (0, 12_000),
        "archs": ("bag",),
        "encoder_student": {"transfer_rows": None},
        "layers": (6, 3, 2),
        "imdb": None,
        "speed": (SPEED_ROUNDS, MIN_ROUND_SECONDS),
    },
    "tiny": {  # CI's smoke run: MiniLM stands in for MPNet as the teacher's encoder
        "rt": 300,
        "teacher_model": "all-MiniLM-L6-v2",
        "curve": (0, 150),
        "archs": ("bag", "ngrams"),  # a second (the cheapest) runs the other architectures' path
        "encoder_student": {"transfer_rows": 50, "epochs": 1, "max_steps": 3},
        "layers": (1,),
        "imdb": None,  # the GPU teacher's logits: not at this scale
        "speed": (1, 0.01),  # one pass of each model: the smoke run measures nothing
    },
}
TEACHER_LOGITS = "mpnet_teacher_logits.csv.gz"
LABELS = "SELECT item_key, label FROM rt_reviews"
RT_SOURCE = "SELECT item_key, text FROM rt_reviews"
TEACHER, FROZEN, STUDENT = "rt_teacher", "rt_minilm_head", "rt_student"
MINILM_PATH, TEACHER_PATH = "MiniLM int8 + head", "teacher (its encoder int8 + head)"
# The bounds on the default word student: its size, and its speed alone from text
# against MiniLM int8 + head; accuracy within TIE_POINTS of the best counts as a tie.
MAX_PARAMETERS, MIN_SPEEDUP, TIE_POINTS = 1_000_000, 20, 0.5


def teacher_logits_path() -> Path | None:
    """The GPU teacher's shared logits: ``$SQLHEADS_SHARED_DATA``, else ``shared/data`` beside
    the checkout (as CI lays it); None where they are not."""
    folder = os.environ.get("SQLHEADS_SHARED_DATA")
    root = Path(__file__).resolve().parent.parent
    path = Path(folder) if folder else root.parent / "shared" / "data"
    path /= TEACHER_LOGITS
    return path if path.is_file() else None


def run(
    out_dir: Path, scale: str = "full", *, size: str = "", section: str = "students"
) -> Section:
    """The section named ``section`` at ``scale``, run at ``SIZES[size]`` (default: the
    scale's own); ``bench dial`` runs it at the dial's size under its own name."""
    from bench.accuracy import tfidf_lr
    from sqlheads import datasets, host
    from sqlheads.engine.encoders.catalog import DEFAULT_MODEL
    from sqlheads.engine.kinds import student_kind
    from sqlheads.engine.students.transfer import DEFAULT_ROWS
    from sqlheads.engine.students.word.student import ARCHITECTURE_SIZES, DEFAULT_ARCH
    from sqlheads.store.repository import Store
    from sqlheads.verbs import encoders

    size = SIZES[size or scale]
    rt = seeded_subsample(datasets.rotten_tomatoes(), size["rt"])
    folder = scratch_dir("bench-students-")
    store = Store.from_url(f"sqlite:///{folder / 'students.db'}")
    host.init(store)
    rt.to_sql("rt_reviews", store.engine, index=False)
    train = (rt["split"] == "train").to_numpy()
    texts, y = rt["text"].tolist(), rt["label"].to_numpy()
    baseline = tfidf_lr(
        [t for t, k in zip(texts, train, strict=True) if k], y[train],
        [t for t, k in zip(texts, train, strict=True) if not k], y[~train],
    )  # fmt: skip
    steps: dict[str, float] = {}

    def step(name: str, action):
        started = time.perf_counter()
        result = action()
        steps[name] = time.perf_counter() - started
        return result

    step("embed, MiniLM (export on first use included)",
         lambda: host.embed(store, set_name="rt_minilm", source=RT_SOURCE))  # fmt: skip
    frozen = step("train the frozen MiniLM head", lambda: host.train(
        store, head=FROZEN, set_name="rt_minilm", labels=LABELS, deploy="always"))  # fmt: skip
    teacher_model = size["teacher_model"]
    teacher_set = "rt_minilm"
    teacher_encoder = "all-MiniLM-L6-v2-int8"
    if teacher_model != DEFAULT_MODEL:
        teacher_encoder = step(
            f"register {teacher_model} int8 (export and parity check)",
            lambda: encoders.register_encoder(store, model=teacher_model),
        ).name
        teacher_set = "rt_teacher_vectors"
        step(f"embed, {teacher_model}", lambda: host.embed(
            store, set_name=teacher_set, source=RT_SOURCE, encoder=teacher_encoder))  # fmt: skip
    teacher = step("train the teacher head", lambda: host.train(
        store, head=TEACHER, set_name=teacher_set, labels=LABELS, deploy="always"))  # fmt: skip

    def distill(name: str, set_name: str = teacher_set, **arguments) -> dict[str, Any]:
        result = step(name, lambda: host.distill(
            store, head=STUDENT, set_name=set_name, labels=LABELS, teacher_head=TEACHER,
            deploy="never", **arguments))  # fmt: skip
        result["metrics"] = json.loads(store.model_record(result["model_id"])["metrics_json"])
        print(f"[students] {name}: {result['accuracy']:.4f}", file=sys.stderr, flush=True)
        return result

    # each student's own default count at full scale (the word student's is DEFAULT_ROWS)
    most_rows = max(size["curve"])
    full_size = size["rt"] is None
    rows = DEFAULT_ROWS if full_size else most_rows
    tfidf_rows = student_kind("tfidf").transfer_rows if full_size else rows
    # The teacher labels the curve's whole transfer set first, in one pass: int8 scoring moves
    # a little with the rows that share a batch, so a set filled in steps is not the set filled
    # at once. Filled once, every student reads the same rows and logits whatever it asks for.
    primed_as = f"TF-IDF student, {fmt(most_rows)} transfer rows"
    primed = distill(
        f"the teacher scoring {fmt(most_rows)} transfer rows, then a TF-IDF student on them",
        student="tfidf", transfer_rows=most_rows, gold_weight=0.5, temperature=2.0)  # fmt: skip
    students = {
        f"word student ({DEFAULT_ARCH}), {fmt(rows)} transfer rows (the default)": distill(
            "distill the default word student", transfer_rows=rows
        ),
        "word student, no transfer rows": distill("distill a word student", transfer_rows=0),
        f"TF-IDF student, {fmt(tfidf_rows)} transfer rows": distill(
            "distill a TF-IDF student",
            student="tfidf",
            transfer_rows=tfidf_rows,
            gold_weight=0.5,
            temperature=2.0,
        ),  # fmt: skip
        # The teacher's soft labels on another set are stored under a name of their own
        # (one name holds one set's: 50021).
        "head student on frozen MiniLM vectors": distill(
            "distill a head student",
            set_name="rt_minilm",
            student="head",
            teacher=f"{TEACHER}_on_minilm" if teacher_set != "rt_minilm" else None,
        ),  # fmt: skip
    }
    if primed_as not in students:
        students[primed_as] = primed
    encoder_options = dict(size["encoder_student"])
    encoder_rows = encoder_options.pop("transfer_rows") or student_kind("encoder").transfer_rows
    epochs = encoder_options.get("epochs") or student_kind("encoder").epochs
    dialled = distill_dial(
        distill, {"transfer_rows": encoder_rows, **encoder_options}, size["layers"]
    )
    students.update(dialled)
    default_student = next(iter(students.values()))
    timed_as = {DEFAULT_ARCH: next(iter(students))}  # each architecture's name in the speed tables

    fitted = {(DEFAULT_ARCH, rows): default_student, (DEFAULT_ARCH, 0): students[
        "word student, no transfer rows"]}  # fmt: skip
    curve: dict[str, dict[int, float]] = {}
    for arch in size["archs"]:
        for count in size["curve"]:
            if (arch, count) not in fitted:
                fitted[arch, count] = distill(
                    f"curve: {arch}, {count} transfer rows", arch=arch, transfer_rows=count
                )
            curve.setdefault(arch, {})[count] = fitted[arch, count]["accuracy"]
        if arch != DEFAULT_ARCH:  # each architecture's speed, at the most rows it saw
            timed_as[arch] = f"word student ({arch}), {fmt(most_rows)} transfer rows"
            students[timed_as[arch]] = fitted[arch, most_rows]

    shared = _shared_teacher(store, rt, size, folder) if size["imdb"] is not None else None
    url = store.engine.url.render_as_string(hide_password=False)
    store.engine.dispose()
    alone = _speed_apart(url, rt.loc[~train, "text"].tolist(), teacher_set, teacher, frozen,
                         students, size["speed"])  # fmt: skip
    speed = _scoring(url, teacher_encoder, teacher_set, teacher, frozen, students)
    reference = speed["MiniLM + head (embed + predict)"]
    accuracy_rows = [
        ["TF-IDF + LR (seed baseline)", "", pct(baseline), "", ""],
        ["frozen MiniLM + head (gold labels)", fmt(frozen["parameters"]),
         pct(frozen["accuracy"]), "", fmt(round(reference))],
        [f"teacher: frozen {teacher_model} int8 + head", fmt(teacher["parameters"]),
         pct(teacher["accuracy"]), "", fmt(round(speed["teacher (embed + predict)"]))],
    ]  # fmt: skip
    for name, result in students.items():
        rate = speed.get(name)
        accuracy_rows.append(
            [name, fmt(result["parameters"]), pct(result["accuracy"]),
             pct(result["teacher_accuracy"]), "" if rate is None else fmt(round(rate))]
        )  # fmt: skip
    if shared is not None:
        accuracy_rows.append(shared)
    teacher_seconds = primed.get("teacher_seconds", {})
    step_rows = [[name, f"{seconds:.1f}"] for name, seconds in steps.items()]
    step_rows.append([f"  of which: the teacher scoring the {fmt(most_rows)} transfer rows",
                      f"{teacher_seconds.get('transfer_scoring', 0.0):.1f}"])  # fmt: skip
    scored = primed.get("teacher_rows_scored", {})
    curve_rows = [
        [arch, fmt(ARCHITECTURE_SIZES[arch]["dim"]), *(pct(curve[arch][n]) for n in size["curve"])]
        for arch in size["archs"]
    ]
    word_rate = speed[next(iter(students))]
    alone_minilm, alone_teacher = alone[MINILM_PATH], alone[TEACHER_PATH]
    alone_rows = [
        [name, fmt(round(rate)), f"{rate / alone_minilm:.1f}x", f"{rate / alone_teacher:.0f}x"]
        for name, rate in alone.items()
    ]
    alone_word = alone[next(iter(students))]
    choice_rows, best = _choice(size["curve"], rows, fitted, timed_as, alone, alone_minilm)
    teacher_rate = speed["teacher (embed + predict)"]
    load = os.getloadavg()
    page = Section(
        name=section,
        title="students: a frozen MPNet head teaches on the CPU",
        scale=scale,
        intro=__doc__.split("\n", 2)[2].strip(),
        tables=[
            Table(
                f"Rotten Tomatoes test accuracy ({fmt(int((~train).sum()))} held-out rows) and "
                "scoring speed from text (rows/s, each path in a fresh process)",
                ["model", "parameters", "accuracy", "teacher, same rows", "rows/s"],
                accuracy_rows,
            ),
            Table(
                f"The models alone: rows/s from text to class probabilities on the "
                f"{fmt(int((~train).sum()))} held-out rows, in one process, every model "
                f"loaded first (best of {size['speed'][0]} interleaved rounds, each pass repeated "
                f"for at least {size['speed'][1]:g} s; no database "
                "reads or writes, which the table above includes)",
                ["model", "rows/s", "vs MiniLM + head", "vs teacher"],
                alone_rows,
            ),
            dial_table(dialled, steps, alone, (MINILM_PATH, alone_minilm), encoder_rows, epochs),
            Table(
                "Wall time per step (seconds), fresh SQLite file, no GPU; load average "
                f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end",
                ["step", "seconds"],
                step_rows,
            ),
            Table(
                "Word students: accuracy against transfer rows (the teacher's cached set; "
                "each architecture at its size in `ARCHITECTURE_SIZES`)",
                ["architecture", "dim", *(f"{fmt(n)} rows" for n in size["curve"])],
                curve_rows,
            ),
            Table(
                "Which word student: each architecture's parameters (at the most transfer "
                f"rows), its speed alone against MiniLM + head, and its best point on the "
                f"curve; eligible: under {fmt(MAX_PARAMETERS)} parameters and at least "
                f"{MIN_SPEEDUP}x MiniLM + head",
                [
                    "architecture",
                    "parameters",
                    "vs MiniLM + head",
                    "eligible",
                    "best accuracy",
                    "at transfer rows",
                ],
                choice_rows,
            ),
        ],
        headline=[
            [
                section,
                "RT: TF-IDF + LR / frozen MiniLM head / word student / teacher",
                f"{pct(baseline)} / {pct(frozen['accuracy'])} / "
                f"{pct(default_student['accuracy'])} / {pct(teacher['accuracy'])}",
            ],
            [
                section,
                "RT rows/s from text: word student vs MiniLM + head / teacher",
                f"{fmt(round(word_rate))} vs {fmt(round(reference))} "
                f"({word_rate / reference:.0f}x) / {fmt(round(teacher_rate))} "
                f"({word_rate / teacher_rate:.0f}x)",
            ],
            [
                section,
                "RT rows/s, the models alone: word student vs MiniLM + head / teacher",
                f"{fmt(round(alone_word))} vs {fmt(round(alone_minilm))} "
                f"({alone_word / alone_minilm:.1f}x) / {fmt(round(alone_teacher))} "
                f"({alone_word / alone_teacher:.0f}x)",
            ],
            dial_headline(section, dialled, alone, alone_minilm),
        ],  # fmt: skip
        notes=[
            f"The default word student: {DEFAULT_ARCH}, "
            f"{json.dumps(ARCHITECTURE_SIZES[DEFAULT_ARCH])}, "
            f"{fmt(rows)} transfer rows. The teacher scored "
            f"{fmt(scored.get('transfer_rows_scored', 0))} transfer rows first, in one pass "
            f"({fmt(scored.get('own_rows_from_stored_vectors', 0))} own rows from the vectors "
            "its set stored); every student read its rows from that cache.",
            best,
        ],
    )
    page.plots.append(_plot(out_dir, f"bench-{section}.png", accuracy_rows, curve, size["curve"]))
    return page


def _choice(
    counts, default_rows, fitted, timed_as, alone, alone_minilm
) -> tuple[list[list[str]], str]:
    """Each architecture's row of the choice table, and a sentence naming the most accurate
    eligible (architecture, transfer rows) of the curve and whether it is the default. Within
    ``TIE_POINTS`` of the best, fewer transfer rows win: each costs the teacher's time, and
    differences that small are a handful of the held-out rows."""
    from sqlheads.engine.students.word.student import DEFAULT_ARCH

    rows, candidates = [], []
    for arch in timed_as:
        most = fitted[arch, max(counts)]
        speedup = alone[timed_as[arch]] / alone_minilm
        eligible = most["parameters"] < MAX_PARAMETERS and speedup >= MIN_SPEEDUP
        top = max(counts, key=lambda n: (fitted[arch, n]["accuracy"], -n))
        rows.append([arch, fmt(most["parameters"]), f"{speedup:.1f}x", "yes" if eligible else "no",
                     pct(fitted[arch, top]["accuracy"]), fmt(top)])  # fmt: skip
        if eligible:
            candidates += [(fitted[arch, n]["accuracy"], arch, n) for n in counts]
    if not candidates:
        return rows, "No word student is eligible in this run."
    top_accuracy = max(accuracy for accuracy, _, _ in candidates)
    close = [c for c in candidates if c[0] >= top_accuracy - TIE_POINTS / 100]
    accuracy, arch, count = min(close, key=lambda c: (c[2], -c[0]))
    default = (arch, count) == (DEFAULT_ARCH, default_rows)
    verdict = (
        "which is the default"
        if default
        else (f"which is NOT the default ({DEFAULT_ARCH}, {fmt(default_rows)} transfer rows)")
    )
    return rows, (
        f"The best eligible word student (the most accurate; within {TIE_POINTS} points of it, "
        f"the fewest transfer rows): {arch} with {fmt(count)} transfer rows, {pct(accuracy)}, "
        f"{verdict}."
    )


def _shared_teacher(store, rt, size, folder) -> list[str] | None:
    """The default word student distilled from the GPU teacher's shared logits (RT train and
    IMDB rows), as a row of the accuracy table; None where the logits are not at hand."""
    from sqlheads import datasets, host
    from sqlheads.engine.students.word.student import DEFAULT_ARCH

    path = teacher_logits_path()
    if path is None:
        return None
    imdb = seeded_subsample(datasets.imdb(), size["imdb"])
    imdb[["item_key", "text"]].to_sql("imdb_reviews", store.engine, index=False)
    logits = pd.read_csv(path)
    logits = logits[logits["teacher"] == "mpnet-rt"]
    keys = set(rt["item_key"]) | set(imdb["item_key"])
    logits[logits["item_key"].isin(keys)].to_sql("shared_logits", store.engine, index=False)
    result = host.distill(
        store, head="rt_shared_student", set_name="rt_minilm", labels=LABELS, deploy="never",
        soft_labels="SELECT item_key, logit_negative AS negative, logit_positive AS positive "
        "FROM shared_logits", arch=DEFAULT_ARCH,
        source="SELECT item_key, text FROM rt_reviews UNION ALL SELECT item_key, text FROM "
        "imdb_reviews",
    )  # fmt: skip
    return [
        f"word student ({DEFAULT_ARCH}) from the GPU teacher mpnet-rt's logits, RT train + "
        f"{fmt(len(imdb))} IMDB rows",
        fmt(result["parameters"]), pct(result["accuracy"]), pct(result["teacher_accuracy"]), "",
    ]  # fmt: skip


def _model_speed(
    store, texts, teacher_set, teacher, frozen, students, speed: tuple[int, float]
) -> dict[str, float]:
    """Rows/s of each model alone, from text to class probabilities, in this process: the
    encoders with their heads, and every student that reads text. All are loaded (and run
    once) first, then timed in turn, round after round, so that a change of load touches
    them all alike; each keeps its best round. ``speed``: how many rounds, and the seconds a pass
    is repeated for at least in each."""
    from sqlheads.engine.encoders.onnx_encoder import load_encoder
    from sqlheads.engine.kinds import model_kind
    from sqlheads.verbs.encoders import encoder_ref

    def encoder_and_head(set_name: str, head: str, version: int):
        row = store.encoder(store.require_set(set_name).encoder_id)
        encoder = load_encoder(encoder_ref(store, row, with_bytes=True))
        model = store.find_model(head, version)
        scorer = model_kind(model.kind).load(store.model_blob(model.model_id))
        return lambda batch: scorer.predict_proba(encoder.encode(batch).vectors)

    paths = {
        MINILM_PATH: encoder_and_head("rt_minilm", FROZEN, frozen["version"]),
        TEACHER_PATH: encoder_and_head(teacher_set, TEACHER, teacher["version"]),
    }
    for name, result in students.items():
        if result["kind"] != "head":
            model = store.find_model(STUDENT, result["version"])
            student = model_kind(model.kind).load(store.model_blob(model.model_id))
            paths[name] = student.predict_proba
    for run in paths.values():
        run(texts[:16])
    best = dict.fromkeys(paths, 0.0)
    rounds, min_seconds = speed
    for _ in range(rounds):
        for name, run in paths.items():
            scored, started = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - started) < min_seconds:
                run(texts)
                scored += len(texts)
            best[name] = max(best[name], scored / elapsed)
    return best


def _speed_apart(url, texts, teacher_set, teacher, frozen, students, speed) -> dict[str, float]:
    """:func:`_model_speed` in a fresh process over the run's SQLite file: in the run's own
    process, after its trainings, MiniLM int8 + head scored 511 rows/s where a fresh process
    scored 638 to 766, while the students kept their speeds (issue 39's dial run)."""
    request = {
        "url": url, "texts": texts, "teacher_set": teacher_set,
        "teacher": {"version": teacher["version"]}, "frozen": {"version": frozen["version"]},
        "students": {n: {"kind": r["kind"], "version": r["version"]} for n, r in students.items()},
        "speed": list(speed),
    }  # fmt: skip
    program = "from bench.students import measure_models_alone; measure_models_alone()"
    return _child(program, "timing the models alone", json.dumps(request))


def measure_models_alone() -> None:
    """The child of :func:`_speed_apart`: its request on stdin, each model's rows/s as JSON
    on stdout."""
    from sqlheads.store.repository import Store

    request = json.load(sys.stdin)
    store = Store.from_url(request["url"])
    alone = _model_speed(
        store, request["texts"], request["teacher_set"], request["teacher"], request["frozen"],
        request["students"], tuple(request["speed"]),
    )  # fmt: skip
    store.engine.dispose()
    print(json.dumps(alone))


def _scoring(url, teacher_encoder, teacher_set, teacher, frozen, students) -> dict[str, float]:
    """Rows/s scoring every RT row from its text into ``predictions``, each path in a fresh
    process (model loading included, imports not): the encoders embed into a new set."""
    paths = {
        "MiniLM + head (embed + predict)": (
            f"host.embed(store, set_name='score_minilm', source={RT_SOURCE!r}); "
            f"scored = host.predict(store, head={FROZEN!r}, set_name='score_minilm', "
            f"version={frozen['version']})"
        ),
        "teacher (embed + predict)": (
            f"host.embed(store, set_name='score_teacher', source={RT_SOURCE!r}, "
            f"encoder={teacher_encoder!r}); "
            f"scored = host.predict(store, head={TEACHER!r}, set_name='score_teacher', "
            f"version={teacher['version']})"
        ),
    }
    for name, result in students.items():
        if result["kind"] == "head":
            continue
        paths[name] = (
            f"scored = host.predict(store, head={STUDENT!r}, set_name={teacher_set!r}, "
            f"version={result['version']}, source={RT_SOURCE!r})"
        )
    speed = {}
    for name, statement in paths.items():
        seconds, rows = _timed(url, statement)
        speed[name] = rows / seconds
    return speed


def _timed(url: str, statement: str) -> tuple[float, int]:
    program = (
        "import json, time\n"
        "from sqlheads import host\n"
        "from sqlheads.store.repository import Store\n"
        f"store = Store.from_url({url!r})\n"
        "started = time.perf_counter()\n"
        f"{statement}\n"
        "print(json.dumps([time.perf_counter() - started, scored['rows']]))\n"
    )
    seconds, rows = _child(program, f"scoring ({statement})")
    return float(seconds), int(rows)


def _child(program: str, doing: str, stdin: str | None = None) -> Any:
    """The JSON a fresh Python process running ``program`` prints last (from the repository
    root, so that it can import ``bench``)."""
    done = subprocess.run(
        [sys.executable, "-c", program], input=stdin, capture_output=True, text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    if done.returncode != 0:  # the child's own error, not only its exit status
        raise RuntimeError(f"{doing} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _plot(out_dir: Path, file_name: str, rows: list[list[str]], curve, counts) -> str:
    plt = pyplot()
    figure, (speed_ax, curve_ax) = plt.subplots(1, 2, figsize=(12, 4.8))
    for index, row in enumerate(rows):
        accuracy = float(row[2].rstrip(" %"))
        if row[4]:
            speed_ax.scatter(float(row[4].replace(",", "")), accuracy, s=50, color=f"C{index % 10}")
            speed_ax.annotate(row[0][:38], (float(row[4].replace(",", "")), accuracy),
                              fontsize=6, xytext=(3, 3), textcoords="offset points")  # fmt: skip
        elif row[0].startswith("TF-IDF + LR"):
            speed_ax.axhline(accuracy, color="gray", linestyle="--", label=row[0])
    speed_ax.set(xscale="log", xlabel="rows/s from text (2 cores)",
                 ylabel="RT test accuracy (%)", title="accuracy against speed")  # fmt: skip
    speed_ax.grid(True, which="both", alpha=0.3)
    speed_ax.legend(fontsize=7)
    for arch, points in curve.items():
        curve_ax.plot(list(counts), [100 * points[n] for n in counts], marker="o", label=arch)
    curve_ax.set(xlabel="transfer rows", ylabel="RT test accuracy (%)",
                 title="word students: accuracy against transfer rows")  # fmt: skip
    curve_ax.grid(True, alpha=0.3)
    curve_ax.legend(fontsize=8)
    return save_figure(figure, out_dir, file_name)
