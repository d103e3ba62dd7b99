"""The teacher job's work function (the sidecar's ``teacher`` kind; contract 1 of issue 9).

``run_teacher`` fine-tunes a transformer teacher on a set's labelled rows, stores it as a
version of ``<head>_teacher`` (kind ``teacher``: never the analysts' head), writes its logits
for every row of the set's source as soft labels (teachers.model_id names that version), then
distils each requested student into a new version of ``<head>`` through ``host.distill``, as
``sqlheads distill --teacher`` would. The held-out rows are those ``train`` and ``distill`` hold
out (same labels, same seed, same fraction): neither the teacher nor a student learns from them.
Each finished stage is noted in ``work_dir``, so a job claimed again after a kill resumes from
the teacher's checkpoint and does not store a stage twice.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sqlheads import caller_rows, host, procedures, settings
from sqlheads.engine import kinds
from sqlheads.errors import (
    InvalidParameterError,
    MissingTextError,
    QueryShapeError,
    UnknownKindError,
)
from sqlheads.sidecar.progress import JobProgress  # contract 2
from sqlheads.store import job_inputs
from sqlheads.store.repository import Store, validate_name
from sqlheads.store.soft_labels import find_teacher, store_soft_labels

# The students a teacher job distils: those that read the rows' text, as the teacher does.
STUDENTS = tuple(
    sorted(s for s, kind in kinds.STUDENTS.items() if kinds.KINDS[kind].reads == "text")
)
DEFAULTS: dict[str, Any] = {
    "source": None,
    "model": "all-mpnet-base-v2",
    # the two measured against this teacher (bench sidecar); tfidf on request (long texts)
    "students": ["encoder", "word"],
    "student_model": "all-MiniLM-L6-v2",
    "deploy": settings.DEFAULT_DEPLOY,
    "test_fraction": settings.TEST_FRACTION,  # train's and distill's: the same split
}
SOFT_LABEL_ROWS = 512  # rows scored between two progress calls
STAGES = "stages.json"


def validate_teacher_request(parameters: dict[str, Any]) -> dict[str, Any]:
    """The teacher job's parameters checked and completed with defaults (a numbered error
    otherwise): ``labels`` (required), ``source``, ``model``, ``students``,
    ``student_model``, ``deploy``, ``test_fraction`` and the fine-tuning knobs of
    :class:`sqlheads.engine.teacher.TeacherParams` — JSON-serialisable values only."""
    from sqlheads.engine.teacher import TeacherParams

    # Every field of TeacherParams is accepted (a request completed once is valid again: the
    # queue stores the completed parameters and the sidecar passes them back).
    knob_names = [f.name for f in fields(TeacherParams)]
    known = {"labels", *DEFAULTS, *knob_names}
    unknown = sorted(set(parameters) - known)
    if unknown:
        raise InvalidParameterError(
            f"the teacher job does not know parameter(s) {', '.join(unknown)}: pass only "
            f"{', '.join(sorted(known))}"
        )
    labels = parameters.get("labels")
    if not isinstance(labels, str) or not labels.strip():
        raise QueryShapeError(
            "a teacher job needs labels: a SELECT returning item_key and label, e.g. "
            "SELECT id AS item_key, sentiment AS label FROM dbo.reviews"
        )
    request = DEFAULTS | {k: v for k, v in parameters.items() if v is not None}
    students = request["students"]
    if isinstance(students, str):
        students = [s.strip() for s in students.split(",") if s.strip()]
    wrong = [s for s in students if s not in STUDENTS]
    if wrong or len(set(students)) != len(students):
        raise UnknownKindError(
            f"students {students!r} are not a list of distinct {' and/or '.join(STUDENTS)}: "
            "pass e.g. ['encoder', 'word'], or [] to fine-tune the teacher alone"
        )
    request["students"] = list(students)
    request["deploy"] = settings.choice("deploy", request["deploy"])
    for name in ("model", "student_model"):
        if not isinstance(request[name], str) or not request[name].strip():
            raise InvalidParameterError(
                f"{name}={request[name]!r} is not a catalogue model name or a directory path"
            )
    if (
        not isinstance(request["test_fraction"], int | float)
        or not 0 < request["test_fraction"] < 1
    ):
        raise InvalidParameterError(
            f"test_fraction={request['test_fraction']!r} must be between 0 and 1, e.g. 0.2"
        )
    try:
        knobs = TeacherParams(**{k: request[k] for k in knob_names if k in request}).validate()
    except TypeError as error:  # a wrong type (a string for a number) fails the comparisons
        raise InvalidParameterError(f"a fine-tuning knob has the wrong type: {error}") from None
    request |= asdict(knobs)
    try:
        json.dumps(request)
    except TypeError as error:
        raise InvalidParameterError(
            f"the teacher job's parameters must be JSON values: {error}"
        ) from None
    return request


def run_teacher(
    store: Store,
    *,
    job_id: int,
    head: str,
    set_name: str,
    device,
    work_dir: Path,
    progress: JobProgress,
    **parameters: Any,
) -> dict[str, Any]:
    """Fine-tune, store the teacher version, its soft labels, then each student; the summary
    (JSON-serialisable) that becomes the job's result_json. The labels and texts are the rows
    the request captured (:mod:`sqlheads.store.job_inputs`): no caller's query runs here."""
    from sqlheads.engine.evaluation import classification_metrics, stratified_split
    from sqlheads.engine.teacher import TeacherClassifier, TeacherParams
    from sqlheads.store.vectors import pack_rows

    started = time.perf_counter()
    request = validate_teacher_request(parameters)
    validate_name("head", head)
    teacher_name = validate_name("teacher", f"{head}{settings.SETTINGS['teacher.suffix'].default}")
    embedding_set = store.require_set(set_name)
    set_encoder = store.encoder(embedding_set.encoder_id)
    # Soft labels of another set under this name are refused before any work (50021).
    caller_rows.refuse_foreign_teacher(find_teacher(store, teacher_name), embedding_set)
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    stages = _Stages(work_dir / STAGES)

    labelled, texts = job_inputs.labels_and_texts(store, job_id)
    # NULL or blank labels are unlabelled rows, as distill reads them: the same split.
    labelled = labelled[procedures.present(labelled["label"], "text")].reset_index(drop=True)
    keys = labelled["item_key"].tolist()
    gold = np.asarray([str(v) for v in labelled["label"]], dtype=object)
    if not keys:
        raise QueryShapeError("the labels query returned no rows: check its WHERE clause")
    lacking = [k for k in keys if not str(texts.get(k) or "").strip()]
    if lacking:
        raise MissingTextError(
            f"{len(lacking)} labelled key(s) have no text (e.g. {lacking[0]!r}): make the "
            "source query return their text"
        )
    train_rows, test_rows = stratified_split(
        keys, gold, test_fraction=request["test_fraction"], seed=request["seed"]
    )
    summary = stages.get("teacher")
    if summary is None:
        knobs = TeacherParams(**{f.name: request[f.name] for f in fields(TeacherParams)})
        progress(0, None, "teacher: loading")
        teacher = TeacherClassifier(
            request["model"], knobs, device=device, work_dir=work_dir / "teacher"
        )
        train_texts = [str(texts[k]) for k in np.asarray(keys, dtype=object)[train_rows]]
        teacher.fit(
            train_texts,
            gold[train_rows].tolist(),
            on_step=lambda done, total: progress(done, total, "teacher: fine-tuning"),
        )
        test_texts = [str(texts[k]) for k in np.asarray(keys, dtype=object)[test_rows]]
        progress(0, len(test_texts), "teacher: held-out rows")
        predicted = np.asarray(teacher.classes_)[teacher.logits(test_texts).argmax(axis=1)]
        metrics = classification_metrics(gold[test_rows].astype(str), predicted, teacher.classes_)
        soft_keys = [k for k, t in texts.items() if t is not None and str(t).strip()]
        soft = np.zeros((len(soft_keys), len(teacher.classes_)), dtype=np.float32)
        for start in range(0, len(soft_keys), SOFT_LABEL_ROWS):
            chunk = soft_keys[start : start + SOFT_LABEL_ROWS]
            soft[start : start + len(chunk)] = teacher.logits([str(texts[k]) for k in chunk])
            progress(start + len(chunk), len(soft_keys), "teacher: soft labels")
        progress(0, None, "teacher: exporting")
        graph, parity = teacher.export(train_texts)
        result = teacher.result_
        metrics |= {
            "parity_max_abs_diff": parity,
            "steps": result.steps,
            "resumed_from_step": result.resumed_from,
            "stopped_early": result.stopped_early,
            "best_validation_loss": result.best_validation_loss,
            "compiled": result.compiled,
            "bf16": result.bf16,
            "device": str(device),
            "fine_tune_seconds": round(result.seconds, 3),
            "blob_bytes": len(graph.to_bytes()),
        }
        teacher_head = teacher_name  # <head>_teacher: a head of its own, never the analysts'
        # The head's lock is taken for the write alone, by the write itself (on SQL Server
        # heads.add_version, which decides the deployment against the version deployed then):
        # the version number cannot race another writer's, and hours of fine-tuning hold
        # no lock that an analyst's deploy or train would wait 600 s for.
        deployed = store.deployed_model(teacher_head)
        version = host.record_version(
            store,
            teacher_head,
            embedding_set,
            set_encoder,
            pd.Series(
                _version_row(teacher, graph, metrics, request, (train_rows, test_rows), deployed)
                | {"seconds": time.perf_counter() - started}
            ),
            request["deploy"],
            {},
        )
        stored = store_soft_labels(
            store,
            teacher_name,
            embedding_set.set_id,
            teacher.classes_,
            soft_keys,
            pack_rows(soft),
            model_id=version["model_id"],
        )
        summary = version | {
            "teacher": stored.name,
            "soft_labels": len(soft_keys),
            "metrics": {k: v for k, v in metrics.items() if k != "per_class"},
        }
        stages.put("teacher", summary)
        del teacher  # frees the teacher's memory (a GPU's) before the students
        if getattr(device, "type", "cpu") == "cuda":
            import torch

            torch.cuda.empty_cache()
    students: dict[str, Any] = {}
    for number, student in enumerate(request["students"]):
        done = stages.get(f"student:{student}")
        if done is None:
            stage = f"student {number + 1}/{len(request['students'])}: {student}"
            progress(0, None, stage)
            extra: dict[str, Any] = {}
            if student == "encoder":
                extra = {
                    "student_model": request["student_model"],
                    "max_length": request["max_length"],
                    "max_steps": request["max_steps"],
                    "device": str(device),
                    "work_dir": str(work_dir / "encoder_student"),
                }
            done = host.distill(
                store,
                head=head,
                set_name=set_name,
                labels=labelled,  # the captured rows, not the caller's queries
                student=student,
                teacher=teacher_name,
                source=texts,
                deploy=request["deploy"],
                seed=request["seed"],
                test_fraction=request["test_fraction"],
                on_progress=lambda steps, total, stage=stage: progress(steps, total, stage),
                **extra,
            )
            stages.put(f"student:{student}", done)
        students[student] = done
    progress(1, 1, "done")
    return {
        "head": head,
        "set": set_name,
        "teacher": summary,
        "students": students,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _version_row(teacher, graph, metrics, request, split, deployed):
    """The teacher version as the row ``train`` and ``distill`` produce (TRAIN_OUTPUT)."""
    import hashlib

    from sqlheads.engine.teacher import TeacherParams

    train_rows, test_rows = split
    blob = graph.to_bytes()
    params = {f.name: request[f.name] for f in fields(TeacherParams)} | {
        "model": request["model"],
        "test_fraction": request["test_fraction"],
    }
    return {
        "classes_json": json.dumps(teacher.classes_),
        "params_json": json.dumps(params),
        "metrics_json": json.dumps(metrics),
        "loss_curve_json": json.dumps(teacher.result_.loss_curve),
        "accuracy": metrics["accuracy"],
        "macro_f1": metrics["macro_f1"],
        "rows_train": int(train_rows.sum()),
        "rows_test": int(test_rows.sum()),
        "blob": blob,
        "sha256": hashlib.sha256(blob).hexdigest(),
        "onnx": None,  # the blob is the ONNX graph already: not stored twice (MPNet: 438 MB)
        "deploy": settings.decide_deploy(
            request["deploy"], metrics["macro_f1"], deployed.macro_f1 if deployed else None
        ),
        "deploy_reason": settings.deploy_reason(request["deploy"]),
        "kind": "teacher",
        "parameters": teacher.n_parameters_,
    }


class _Stages:
    """Which stages of this job are stored already (a JSON file in the job's work_dir)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = json.loads(path.read_text()) if path.is_file() else {}

    def get(self, stage: str) -> dict[str, Any] | None:
        return self.done.get(stage)

    def put(self, stage: str, summary: dict[str, Any]) -> None:
        self.done[stage] = summary
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(self.done))
        partial.replace(self.path)
