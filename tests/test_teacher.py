"""Teacher fine-tuning and the teacher job: real MiniLM weights, real SQLite, a few CPU steps.

Fine-tuning here is tiny (tens of rows, 32 tokens, a handful of optimiser steps): these tests
check the mechanics (resume after a real SIGKILL, early stopping, the compile rule, refusals,
soft labels and versions stored by the job), not the teacher's accuracy.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sqlalchemy import select
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.engine.devices import resolve_device
from sqlheads.engine.encoders.catalog import catalog_encoder
from sqlheads.engine.evaluation import held_out_keys, stratified_split
from sqlheads.engine.training.fine_tuning import TeacherClassifier
from sqlheads.engine.training.params import TeacherParams, TunerParams
from sqlheads.engine.training.tuner import (
    BEST,
    CHECKPOINT,
    Distributed,
    adamw,
    should_compile,
    token_batches,
    use_bf16,
)
from sqlheads.errors import (
    CheckpointMismatchError,
    DeviceUnavailableError,
    ForeignSoftLabelsError,
    InvalidParameterError,
    JobCancelledError,
    QueryShapeError,
    UnknownKindError,
    UnsupportedTeacherError,
)
from sqlheads.sidecar.requests import TeacherRequest, request_teacher
from sqlheads.sidecar.teacher import STAGES, run_teacher
from sqlheads.sidecar.worker import Sidecar, SidecarOptions
from sqlheads.store import schema
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store
from sqlheads.store.soft_labels import find_teacher, read_soft_labels, store_soft_labels

MINILM = "all-MiniLM-L6-v2"
LABELS = "SELECT item_key, label FROM reviews"
TINY = {"max_length": 32, "batch_size": 8, "epochs": 1}
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny(rt_sample) -> pd.DataFrame:
    """40 reviews, 20 of each class."""
    return pd.concat(g.head(20) for _, g in rt_sample.groupby("label")).reset_index(drop=True)


@pytest.fixture(scope="module")
def tiny_template(tmp_path_factory, tiny: pd.DataFrame) -> Path:
    """The 40 reviews in table 'reviews', embedded into set 'reviews'."""
    path = tmp_path_factory.mktemp("tiny") / "heads.db"
    store = Store.from_url(f"sqlite:///{path}")
    host.init(store)
    tiny.to_sql("reviews", store.engine, index=False)
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    store.engine.dispose()
    return path


@pytest.fixture
def tiny_store(tiny_template: Path, copy_database) -> Store:
    return copy_database(tiny_template)


# -- the fine-tuning loop ---------------------------------------------------------------------

KILLED_RUN = """
import sys, time
from sqlheads import datasets
from sqlheads.engine.training.fine_tuning import TeacherClassifier
from sqlheads.engine.training.params import TeacherParams
rows = datasets.rotten_tomatoes().sample(48, random_state=0)
params = TeacherParams(**{params})
TeacherClassifier("all-MiniLM-L6-v2", params, work_dir=sys.argv[1]).fit(
    rows.text.tolist(), rows.label.astype(str).tolist(),
    progress=lambda done, total, stage: time.sleep(2),  # time to kill it mid-run
)
"""


def _fit(work_dir: Path | None, model: str = MINILM, **params):
    from sqlheads import datasets

    rows = datasets.rotten_tomatoes().sample(48, random_state=0)
    teacher = TeacherClassifier(model, TeacherParams(**params), work_dir=work_dir)
    return teacher.fit(rows.text.tolist(), rows.label.astype(str).tolist()), rows


def test_a_killed_fine_tuning_resumes_from_its_checkpoint_not_from_zero(tmp_path):
    # Checkpoints by wall clock (each step sleeps 2 s), written on the writer's thread.
    params = TINY | {"max_steps": 5, "checkpoint_seconds": 1, "patience": 0}
    work_dir = tmp_path / "work"
    script = KILLED_RUN.replace("{params}", repr(params))
    process = subprocess.Popen([sys.executable, "-c", script, str(work_dir)], env=os.environ)
    deadline = time.monotonic() + 240
    while not (work_dir / CHECKPOINT).is_file():
        assert process.poll() is None, "the fine-tuning ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)  # a real kill: no handler, no cleanup
    process.wait()
    saved_step = torch.load(work_dir / CHECKPOINT, weights_only=False)["state"]["step"]
    assert 1 <= saved_step < 5

    resumed, rows = _fit(work_dir, **params)
    assert resumed.result_.resumed_from == saved_step  # continued, not restarted
    assert resumed.result_.steps == 5
    # The same steps as a run never killed: same batches, same RNG, same optimiser state.
    straight, _ = _fit(None, **params)
    texts = rows.text.tolist()[:8]
    np.testing.assert_allclose(resumed.logits(texts), straight.logits(texts), atol=1e-4)

    with pytest.raises(CheckpointMismatchError) as error:  # another request, same folder
        _fit(work_dir, **(params | {"lr": 1e-4}))
    assert error.value.number == 50058 and "delete that folder" in error.value.message


def test_early_stopping_stops_when_the_validation_slice_gets_worse_and_keeps_the_best(
    tmp_path,
):
    # A learning rate far too high for a transformer: the held-back slice's loss climbs.
    params = TINY | {"lr": 1e-2, "max_steps": 12, "eval_steps": 1, "patience": 1}
    teacher, rows = _fit(tmp_path, **params)
    result = teacher.result_
    assert result.stopped_early and result.steps < 12
    assert result.best_validation_loss is not None
    assert len(result.loss_curve) == result.steps  # one evaluation per step
    best = torch.load(tmp_path / BEST, weights_only=True)["state_dict"]
    kept = teacher.model_.state_dict()
    assert all(torch.equal(best[name].cpu(), kept[name].cpu()) for name in best)
    last = torch.load(tmp_path / CHECKPOINT, weights_only=False)["model"]
    assert not all(torch.equal(last[name], best[name]) for name in best)  # not the last weights


def test_a_checkpoint_its_thread_cannot_write_fails_the_fine_tuning(tmp_path):
    # Written off the training thread, a failed write must still reach the caller: a file
    # stands where the work folder should be.
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("in the way")
    with pytest.raises(OSError):
        _fit(blocked, **(TINY | {"max_steps": 1, "patience": 0}))


def test_compile_is_chosen_by_rule_only_on_cuda_with_a_few_fixed_shapes():
    cuda, bucketed = torch.device("cuda:0"), TunerParams()
    assert not should_compile("auto", CPU, bucketed)  # never by rule on the CPU
    assert should_compile("auto", cuda, bucketed)
    # a shape per padded length (224 s of recompiling on an H100), or per token-budget batch
    assert not should_compile("auto", cuda, TunerParams(pad_multiple=1))
    assert not should_compile("auto", cuda, TunerParams(batch_tokens=4096))
    assert should_compile("on", CPU, bucketed) and not should_compile("off", cuda, bucketed)
    assert not use_bf16("auto", CPU)
    with pytest.raises(InvalidParameterError, match="bf16"):
        use_bf16("bf16", CPU)


def test_the_optimiser_is_adamws_fused_kernel_on_the_cpu_too_with_the_loops_steps():
    torch.manual_seed(0)
    fused_net = torch.nn.Linear(16, 4)
    loop_net = torch.nn.Linear(16, 4)
    loop_net.load_state_dict(fused_net.state_dict())
    params = TunerParams(lr=1e-2)
    fused = adamw(fused_net.parameters(), params)
    assert fused.defaults["fused"]  # one kernel per step, as on CUDA
    loop = torch.optim.AdamW(
        loop_net.parameters(), lr=params.lr, weight_decay=params.weight_decay, foreach=False
    )
    rows = torch.randn(32, 16)
    for net, optimizer in ((fused_net, fused), (loop_net, loop)):
        for _ in range(3):
            net(rows).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    torch.testing.assert_close(fused_net.weight, loop_net.weight)


def test_token_budget_batches_hold_every_row_once_within_both_limits():
    lengths = np.random.default_rng(0).integers(5, 129, size=1000)
    params = TunerParams(batch_size=64, batch_tokens=2048, pad_multiple=16)
    batches = token_batches(lengths, params, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    for batch in batches:
        width = -(-int(lengths[batch].max()) // 16) * 16
        assert len(batch) <= 64 and (len(batch) == 1 or len(batch) * width <= 2048)
    sizes = {len(b) for b in batches}
    assert max(sizes) == 64 and min(sizes) < 32  # short rows in full batches, long in small ones
    again = token_batches(lengths, params, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(batches, again, strict=True))  # resumable


def test_bucketed_padding_and_token_budgets_train_to_the_same_logits():
    # Padding to multiples of 16 only adds masked columns: the same steps, the same model
    # within float rounding (1e-3 in a logit after 3 optimiser steps).
    params = TINY | {"max_steps": 3, "patience": 0}
    exact, rows = _fit(None, pad_multiple=1, **params)
    bucketed, _ = _fit(None, pad_multiple=16, **params)
    texts = rows.text.tolist()[:8]
    np.testing.assert_allclose(bucketed.logits(texts), exact.logits(texts), atol=1e-3)
    # A budget of 256 tokens splits 16-row batches of 32-token reviews: more, smaller steps.
    whole = params | {"max_steps": None, "batch_size": 16}
    budget, _ = _fit(None, batch_tokens=256, **whole)
    rows_only, _ = _fit(None, **whole)
    assert budget.result_.steps > rows_only.result_.steps
    assert np.isfinite(budget.logits(texts)).all()


def test_under_torchrun_each_rank_takes_an_equal_disjoint_share_and_only_rank_0_writes():
    batches = [np.array([i]) for i in range(7)]
    ranks = [Distributed(rank, 2) for rank in (0, 1)]
    shares = [d.shard(batches) for d in ranks]
    assert [len(s) for s in shares] == [3, 3]  # the odd batch is dropped, as DistributedSampler
    assert not {int(b[0]) for b in shares[0]} & {int(b[0]) for b in shares[1]}
    assert ranks[0].writes and not ranks[1].writes
    assert Distributed().shard(batches) == batches


DDP_RUN = """
import json, os, sys
from sqlheads import datasets
from sqlheads.engine.training.fine_tuning import TeacherClassifier
from sqlheads.engine.training.params import TeacherParams
rows = datasets.rotten_tomatoes().sample(64, random_state=0)
params = TeacherParams(max_length=32, batch_size=8, epochs=1, max_steps=3, eval_steps=1)
teacher = TeacherClassifier("all-MiniLM-L6-v2", params, work_dir=sys.argv[1])
teacher.fit(rows.text.tolist(), rows.label.astype(str).tolist())
weights = teacher.model_.classifier.weight.detach()
print("RESULT", json.dumps({"rank": int(os.environ["RANK"]), "steps": teacher.result_.steps,
      "weights": weights.flatten()[:8].tolist()}), flush=True)
"""


def test_fine_tuning_under_torchrun_keeps_the_ranks_in_step(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP_RUN)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        + [str(script), str(tmp_path / "work")],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ranks = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    assert all(r["steps"] == 3 for r in ranks)
    # gradients all-reduced: both ranks hold the same weights after their different shares
    np.testing.assert_allclose(ranks[0]["weights"], ranks[1]["weights"], atol=1e-6)
    assert (tmp_path / "work" / CHECKPOINT).is_file()  # written once, by rank 0


@pytest.mark.skipif(
    not catalog_encoder("all-mpnet-base-v2").installed(), reason="all-mpnet-base-v2 not installed"
)
def test_mpnet_fine_tunes_a_couple_of_steps():
    teacher, rows = _fit(
        None, "all-mpnet-base-v2", max_length=32, batch_size=4, epochs=1, max_steps=2, patience=0
    )
    assert teacher.model_.config.model_type == "mpnet"
    assert teacher.result_.steps == 2
    assert teacher.logits(rows.text.tolist()[:3]).shape == (3, 2)


# -- refusals --------------------------------------------------------------------------------


def test_a_directory_of_another_family_is_refused_naming_its_model_type(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(UnsupportedTeacherError) as error:
        TeacherClassifier(tmp_path)
    assert error.value.number == 50056 and "'gpt2'" in error.value.message


def test_a_gpu_asked_for_on_a_machine_without_one_is_refused(tiny_store: Store):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceUnavailableError) as error:
        host.distill(
            tiny_store,
            head="sent",
            set_name="reviews",
            labels=LABELS,
            student="encoder",
            soft_labels="SELECT item_key, 0.0 AS negative, 1.0 AS positive FROM reviews",
            device="cuda",
        )
    assert error.value.number == 50055
    assert host.models(tiny_store).empty


@pytest.mark.parametrize(
    ("parameters", "error", "match"),
    [
        ({}, QueryShapeError, "needs labels"),
        ({"labels": LABELS, "student": ["word"]}, InvalidParameterError, "does not know"),
        ({"labels": LABELS, "students": ["head"]}, UnknownKindError, "encoder"),
        ({"labels": LABELS, "epochs": 0}, InvalidParameterError, "epochs"),
        ({"labels": LABELS, "lr": "fast"}, InvalidParameterError, "wrong type"),
        ({"labels": LABELS, "deploy": "sometimes"}, InvalidParameterError, "deploy"),
        ({"labels": LABELS, "compile": "maybe"}, InvalidParameterError, "compile"),
        ({"labels": LABELS, "test_fraction": 1.5}, InvalidParameterError, "test_fraction"),
    ],
)
def test_bad_teacher_requests_are_refused_with_numbers(parameters, error, match):
    with pytest.raises(error, match=match):
        TeacherRequest.from_flat(parameters, what="the teacher job")


def _completed(parameters: dict) -> dict:
    return TeacherRequest.from_flat(parameters, what="the teacher job").to_flat()


def test_a_teacher_request_is_completed_with_defaults_and_stays_json():
    request = _completed({"labels": LABELS, "students": "word", "max_steps": 3})
    assert request["model"] == "all-mpnet-base-v2" and request["students"] == ["word"]
    assert request["student_model"] == MINILM and request["deploy"] == "if-better"
    assert request["max_steps"] == 3 and request["epochs"] == TeacherParams.epochs
    assert json.loads(json.dumps(request)) == request
    assert _completed(request) == request  # the queue stores it; valid again


def test_soft_labels_of_another_set_are_refused_before_any_work(
    tiny_store: Store, tiny: pd.DataFrame, tmp_path
):
    tiny.head(10).to_sql("other", tiny_store.engine, index=False)
    host.embed(tiny_store, set_name="other", source="SELECT item_key, text FROM other")
    other = tiny_store.require_set("other")
    store_soft_labels(tiny_store, "sent_teacher", other.set_id, ["negative", "positive"], [], [])
    calls = []
    with pytest.raises(ForeignSoftLabelsError) as error:
        _job(tiny_store, tmp_path, lambda *call: calls.append(call))
    assert error.value.number == 50021 and calls == []


# -- the job end to end ------------------------------------------------------------------------


def _job(store: Store, tmp_path: Path, progress, **parameters):
    """Request the job as an analyst would (its rows captured, issue 19), then run it."""
    requested = request_teacher(store, head="sent", set_name="reviews", labels=LABELS, **parameters)
    return run_teacher(
        store,
        job_id=requested["job_id"],
        head="sent",
        set_name="reviews",
        device=CPU,
        work_dir=tmp_path / "job",
        progress=progress,
        **requested["parameters"],
    )


@dataclass
class TeacherJob:
    """The suite's one real teacher job, and what it left."""

    database: Path  # the SQLite file after the run (a template: tests copy it)
    job_id: int
    requested: dict  # `sqlheads --json request-teacher`'s output
    summary: dict  # run_teacher's result
    calls: list[tuple]  # every progress call, (done, total, stage)
    stages: Path  # the job's notes of its finished stages


def _cli(url: str, *args: str) -> dict:
    result = CliRunner().invoke(app, ["--url", url, "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def teacher_job(tmp_path_factory, tiny_template: Path, copy_sqlite) -> TeacherJob:
    """Requested as an analyst does (`sqlheads request-teacher`: MiniLM, 3 steps, both
    students, 30 transfer rows), then run by ``run_teacher`` with the parameters the queue
    stored and the device a CPU sidecar resolves, as the sidecar's worker calls it; its
    progress calls recorded."""
    folder = tmp_path_factory.mktemp("teacher_job")
    database = folder / "heads.db"
    copy_sqlite(tiny_template, database).engine.dispose()
    url = f"sqlite:///{database}"
    requested = _cli(
        url, "request-teacher", "--head", "sent", "--set", "reviews", "--labels", LABELS,
        "--model", MINILM, "--student", "encoder", "--student", "word",
        "--max-steps", "3", "--max-length", "32", "--batch-size", "8", "--epochs", "1",
        "--deploy", "always", "--transfer-rows", "30",
    )  # fmt: skip
    store = Store.from_url(url)
    job = JobQueue(store).get(requested["job_id"])
    calls: list[tuple] = []
    summary = run_teacher(
        store,
        job_id=job.job_id,
        head=job.head,
        set_name=job.set_name,
        device=resolve_device("cpu"),
        work_dir=folder / "work",
        progress=lambda *call: calls.append(call),
        **job.parameters,
    )
    store.engine.dispose()
    return TeacherJob(database, job.job_id, requested, summary, calls, folder / "work" / STAGES)


def test_run_teacher_stores_the_teacher_its_soft_labels_and_both_students(
    teacher_job: TeacherJob, copy_database, tiny: pd.DataFrame
):
    store = copy_database(teacher_job.database)
    summary = teacher_job.summary
    assert json.loads(json.dumps(summary)) == summary  # the job's result_json
    # The stored parameters are complete: source from the set, defaults filled in.
    assert teacher_job.requested["parameters"]["source"] == "SELECT item_key, text FROM reviews"
    assert teacher_job.requested["parameters"]["students"] == ["encoder", "word"]

    versions = host.models(store).set_index(["head", "version"])
    assert versions.loc[("sent_teacher", 1), "kind"] == "teacher"
    assert versions.loc[("sent", 1), "kind"] == "encoder_student"
    assert versions.loc[("sent", 2), "kind"] == "word_student"
    assert (versions.loc["sent", "teacher"] == "sent_teacher").all()

    # The held-out rows are distill's: same labels, same seed; the teacher never learnt them.
    keys, labels = tiny["item_key"].astype(str), tiny["label"].astype(str)
    _, test_rows = stratified_split(keys, labels, test_fraction=0.2, seed=0)
    teacher = summary["teacher"]
    assert teacher["rows_test"] == int(test_rows.sum())
    assert teacher["rows_train"] == len(tiny) - int(test_rows.sum())
    assert summary["students"]["encoder"]["rows_test"] == teacher["rows_test"]
    assert teacher["metrics"]["steps"] == 3 and teacher["metrics"]["parity_max_abs_diff"] < 1e-3

    # The teacher scored the transfer rows where it ran; both students read them from the
    # cache, and none of them was made from a held-out row.
    assert teacher["transfer_rows"] == 30
    for student in summary["students"].values():
        assert student["teacher_rows_scored"]["transfer_rows_scored"] == 0
        assert student["teacher_rows_scored"]["transfer_rows_cached"] == 30
        assert student["rows_train"] == teacher["rows_train"] + 30
    with store.engine.connect() as c:
        origins = set(c.execute(select(schema.transfer_rows.c.origin_key)).scalars())
    held_out = held_out_keys(tiny["item_key"], tiny["label"], test_fraction=0.2, seed=0)
    assert held_out == set(keys[test_rows])
    assert origins and origins <= set(keys) - held_out

    # Soft labels for every row of the source, under a teachers row naming the version.
    with store.engine.connect() as c:
        row = c.execute(select(schema.teachers).where(schema.teachers.c.name == "sent_teacher"))
        stored = row.one()
        count = c.execute(
            select(schema.soft_labels.c.item_key).where(
                schema.soft_labels.c.teacher_id == stored.teacher_id
            )
        ).all()
    assert stored.model_id == teacher["model_id"] and len(count) == len(tiny)
    assert stored.set_id == store.require_set("reviews").set_id

    # Every version predicts into latest_predictions once deployed, scored from raw text.
    for head, version in (("sent_teacher", 1), ("sent", 1), ("sent", 2)):
        host.deploy(store, head=head, version=version)
        assert host.predict(store, head=head, set_name="reviews")["rows"] == len(tiny)
        latest = store.read_view("latest_predictions", head=head)
        assert len(latest) == len(tiny) and (latest["version"] == version).all()
        if head == "sent_teacher":
            # its recorded held-out accuracy is its stored graph's, on the held-out rows
            shown = latest.set_index("item_key")["label"].reindex(keys[test_rows])
            held_out = (shown.to_numpy() == labels[test_rows].to_numpy()).mean()
            assert teacher["metrics"]["accuracy"] == pytest.approx(held_out, abs=1e-4)

    stages = {s for _, _, s in teacher_job.calls}
    assert {"teacher: fine-tuning", "teacher: soft labels", "done"} <= stages
    assert any(s and s.startswith("student 1/2: encoder") for s in stages)


def test_a_sidecar_claiming_a_job_whose_stages_are_stored_does_none_of_them_twice(
    teacher_job: TeacherJob, copy_database, tiny: pd.DataFrame
):
    """A sidecar killed after the job's last stage, before it marked the job done: the next
    `sqlheads sidecar --once` claims the job, finds every stage noted in the job's work folder,
    and finishes it without a second teacher, soft labels or student; the folder goes."""
    store = copy_database(teacher_job.database)
    url = store.engine.url.render_as_string(hide_password=False)
    work_dir = Sidecar(store, SidecarOptions(device="cpu")).work_dir(teacher_job.job_id)
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    shutil.copyfile(teacher_job.stages, work_dir / STAGES)

    ran = _cli(url, "sidecar", "--once", "--device", "cpu")
    assert [(j["job_id"], j["state"]) for j in ran["jobs"]] == [(teacher_job.job_id, "done")]
    job = JobQueue(store).get(teacher_job.job_id)
    assert (job.state, job.attempts) == ("done", 1)
    assert not work_dir.exists()  # its checkpoints (three times the teacher's weights) went
    result = json.loads(JobQueue(store).listing()["result_json"].iloc[0])
    assert result["teacher"] == teacher_job.summary["teacher"]
    assert result["students"] == teacher_job.summary["students"]
    assert len(host.models(store)) == 3
    assert len(read_soft_labels(store, find_teacher(store, "sent_teacher").teacher_id)) == len(tiny)
    predicted = _cli(url, "predict", "--head", "sent", "--set", "reviews")
    assert predicted["rows"] == len(tiny)
    assert len(store.read_view("latest_predictions", head="sent")) == len(tiny)


def test_a_cancelled_teacher_job_propagates_and_stores_nothing(tiny_store: Store, tmp_path):
    stages: list[str] = []

    def progress(done, total, stage):
        if stage is not None:  # None: the stage named last goes on
            stages.append(stage)
        if stages[-1] == "teacher: fine-tuning" and done >= 1:
            raise JobCancelledError("job 1 was cancelled")

    with pytest.raises(JobCancelledError):
        _job(tiny_store, tmp_path, progress, model=MINILM, max_steps=3, **TINY)
    assert host.models(tiny_store).empty


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU: the loop's CUDA-only branches"
)
def test_on_cuda_the_loop_compiles_over_buckets_pins_and_resumes(tmp_path):
    # Every CUDA-only branch of the loop (pinned copies, fused AdamW, compile over buckets,
    # checkpoints copied off the GPU) on a real GPU; resumed, the same logits as straight.
    params = TINY | {"max_steps": 4, "patience": 0, "checkpoint_steps": 2}
    cuda = torch.device("cuda")
    from sqlheads import datasets

    rows = datasets.rotten_tomatoes().sample(48, random_state=0)
    texts, labels = rows.text.tolist(), rows.label.astype(str).tolist()
    first = TeacherClassifier(MINILM, TeacherParams(**params), device=cuda, work_dir=tmp_path)
    first.fit(texts, labels)
    assert first.result_.compiled and first.result_.steps == 4
    again = TeacherClassifier(MINILM, TeacherParams(**params), device=cuda, work_dir=tmp_path)
    again.fit(texts, labels)
    assert again.result_.resumed_from == 4
    np.testing.assert_allclose(again.logits(texts[:8]), first.logits(texts[:8]), atol=1e-3)
