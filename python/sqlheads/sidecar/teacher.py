"""The teacher job's work function (the sidecar's ``teacher`` kind).

``run_teacher`` fine-tunes a transformer teacher on a set's labelled rows, stores it as a
version of ``<head>_teacher`` (kind ``teacher``: never the analysts' head), writes its logits
for every row of the set's source as soft labels (teachers.model_id names that version), then
distils each requested student into a new version of ``<head>`` through
:func:`sqlheads.verbs.distill.distill`, as ``sqlheads distill --teacher`` would. The held-out
rows are those ``train`` and ``distill`` hold out (same labels, same seed, same fraction):
neither the teacher nor a student learns from them. Each finished stage is noted in
``work_dir``, so a job claimed again after a kill resumes from the teacher's checkpoint and does
not store a stage twice.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sqlheads import settings
from sqlheads.compute.columns import no_labelled_rows
from sqlheads.compute.distill import Distillation
from sqlheads.compute.versions import Fitted, version_row
from sqlheads.engine import kinds
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.errors import (
    MissingTextError,
)
from sqlheads.sidecar.requests import TeacherRequest
from sqlheads.store.repository import EmbeddingSet, Store, validate_name
from sqlheads.store.soft_labels import find_teacher, store_soft_labels
from sqlheads.store.vectors import pack_rows
from sqlheads.verbs import teach
from sqlheads.verbs.distill import Teaching, distill
from sqlheads.verbs.encoders import encoder_ref
from sqlheads.verbs.rows import RowSource
from sqlheads.verbs.soft_labels import refuse_foreign_teacher
from sqlheads.verbs.versions import record_version

SOFT_LABEL_ROWS = 512  # rows scored between two progress calls
STAGES = "stages.json"


def run_teacher(
    store: Store,
    *,
    job_id: int,
    head: str,
    set_name: str,
    device,
    work_dir: Path,
    progress: Progress,
    **parameters: Any,
) -> dict[str, Any]:
    """Fine-tune, store the teacher version, its soft labels, then each student, as the
    request's ``parameters`` (its stored JSON: :class:`TeacherRequest`'s fields; a request made
    in T-SQL stores only those the analyst gave, completed here) say; the summary
    (JSON-serialisable) that becomes the job's result_json. The labels and texts are the rows
    the request captured (:mod:`sqlheads.store.job_inputs`): no caller's query runs here."""
    started = time.perf_counter()
    request = TeacherRequest.from_flat(parameters, what="the teacher job")
    validate_name("head", head)
    teacher_name = validate_name("teacher", f"{head}{settings.SETTINGS['teacher.suffix'].default}")
    embedding_set = store.require_set(set_name)
    # Soft labels of another set under this name are refused before any work (50021).
    refuse_foreign_teacher(find_teacher(store, teacher_name), embedding_set)
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    job = _TeacherJob(
        store=store,
        head=head,
        embedding_set=embedding_set,
        teacher_name=teacher_name,
        request=request,
        captured=RowSource(store, request.labels, job_id=job_id),
        device=device,
        work_dir=work_dir,
        progress=progress,
        started=started,
    )
    stages = _Stages(work_dir / STAGES)
    labelled, texts, split = job.labelled_rows()
    summary = stages.get("teacher")
    if summary is None:
        summary = job.teacher(labelled, texts, split)
        stages.put("teacher", summary)
        if getattr(device, "type", "cpu") == "cuda":  # the teacher is gone: free its memory
            import torch

            torch.cuda.empty_cache()
    students: dict[str, Any] = {}
    for number, student in enumerate(request.students):
        done = stages.get(f"student:{student}")
        if done is None:
            done = job.student(student, f"student {number + 1}/{len(request.students)}")
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


@dataclass(frozen=True)
class _TeacherJob:
    """One teacher job's context, and its stages: the teacher, then each student."""

    store: Store
    head: str
    embedding_set: EmbeddingSet
    teacher_name: str  # <head>_teacher: a head of its own, never the analysts'
    request: TeacherRequest
    captured: RowSource  # the labels and texts the request captured
    device: Any
    work_dir: Path
    progress: Progress
    started: float

    def labelled_rows(self) -> tuple[pd.DataFrame, dict[str, Any], tuple[np.ndarray, np.ndarray]]:
        """The labelled rows (NULL or blank labels are unlabelled rows, as distill reads them),
        every row's text, and the held-out split train and distill make of them."""
        from sqlheads.engine.evaluation import stratified_split

        labelled, texts = self.captured.labels(), self.captured.texts()
        keys = labelled["item_key"].tolist()
        if not keys:
            raise no_labelled_rows()
        lacking = [k for k in keys if not str(texts.get(k) or "").strip()]
        if lacking:
            raise MissingTextError(
                f"{len(lacking)} labelled key(s) have no text (e.g. {lacking[0]!r}): make the "
                "source query return their text"
            )
        gold = np.asarray([str(v) for v in labelled["label"]], dtype=object)
        split = stratified_split(
            keys,
            gold,
            test_fraction=self.request.version.test_fraction,
            seed=self.request.tuning.seed,
        )
        return labelled, texts, split

    def teacher(
        self,
        labelled: pd.DataFrame,
        texts: dict[str, Any],
        split: tuple[np.ndarray, np.ndarray],
    ) -> dict[str, Any]:
        """Fine-tune the teacher, score the held-out rows and every row (its soft labels),
        export it; store the version and the soft labels. The stage's summary."""
        from sqlheads.engine.evaluation import classification_metrics
        from sqlheads.engine.training.fine_tuning import TeacherClassifier

        keys = np.asarray(labelled["item_key"].tolist(), dtype=object)
        gold = np.asarray([str(v) for v in labelled["label"]], dtype=object)
        train_rows, test_rows = split
        self.progress(0, None, "teacher: loading")
        teacher = TeacherClassifier(
            self.request.model,
            self.request.tuning,
            device=self.device,
            work_dir=self.work_dir / "teacher",
        )
        train_texts = [str(texts[k]) for k in keys[train_rows]]
        self.progress(0, None, "teacher: fine-tuning")
        teacher.fit(train_texts, gold[train_rows].tolist(), progress=self.progress)
        test_texts = [str(texts[k]) for k in keys[test_rows]]
        self.progress(0, len(test_texts), "teacher: held-out rows")
        predicted = np.asarray(teacher.classes_)[teacher.logits(test_texts).argmax(axis=1)]
        metrics = classification_metrics(gold[test_rows].astype(str), predicted, teacher.classes_)
        soft_keys, soft = self._soft_labels(teacher, texts)
        self.progress(0, None, "teacher: exporting")
        graph, parity = teacher.export(train_texts)
        blob = graph.to_bytes()
        metrics |= _fine_tuning_metrics(teacher, parity, self.device, blob)
        version = self._store_version(teacher, blob, metrics, split, keys.tolist())
        stored = store_soft_labels(
            self.store,
            self.teacher_name,
            self.embedding_set.set_id,
            teacher.classes_,
            soft_keys,
            pack_rows(soft),
            model_id=version["model_id"],
        )
        return version | {
            "teacher": stored.name,
            "soft_labels": len(soft_keys),
            "transfer_rows": self._transfer_rows(teacher, texts, set(keys[test_rows]), version),
            "metrics": {k: v for k, v in metrics.items() if k != "per_class"},
        }

    def _transfer_rows(
        self, teacher: Any, texts: dict[str, Any], held_out: set[str], version: dict[str, Any]
    ) -> int:
        """Build the text students' transfer rows from the rows they may learn from and have
        the fine-tuned teacher score them here (on the job's device), into the cache that
        ``distill`` reads them from; how many there are."""
        from sqlheads.engine.students.soft_labels import Teacher
        from sqlheads.engine.students.transfer import TransferRecipe, learnable_rows

        if not self.request.transfer_rows or not self.request.students:
            return 0
        origin, exclude = learnable_rows(texts, held_out)
        set_encoder = self.store.encoder(self.embedding_set.encoder_id)
        scoring = teach.TeacherHead(
            self.teacher_name,
            self.store.model_by_id(version["model_id"]),
            list(teacher.classes_),
            self.store,
            loaded=Teacher(_Probabilities(teacher), "text"),
        )
        self.progress(0, None, "teacher: transfer rows")
        made = teach.transfer_soft_labels(
            self.store,
            scoring,
            origin,
            TransferRecipe(rows=self.request.transfer_rows, seed=self.request.tuning.seed),
            encoder_ref(self.store, set_encoder, with_bytes=True),
            self.progress,
            exclude=exclude,
        )
        return len(made)

    def _soft_labels(self, teacher: Any, texts: dict[str, Any]) -> tuple[list[str], np.ndarray]:
        """The teacher's logits for every row with a text, by key."""
        soft_keys = [k for k, t in texts.items() if t is not None and str(t).strip()]
        soft = np.zeros((len(soft_keys), len(teacher.classes_)), dtype=np.float32)
        for start in range(0, len(soft_keys), SOFT_LABEL_ROWS):
            chunk = soft_keys[start : start + SOFT_LABEL_ROWS]
            soft[start : start + len(chunk)] = teacher.logits([str(texts[k]) for k in chunk])
            self.progress(start + len(chunk), len(soft_keys), "teacher: soft labels")
        return soft_keys, soft

    def _store_version(
        self,
        teacher: Any,
        blob: bytes,
        metrics: dict[str, Any],
        split: tuple[np.ndarray, np.ndarray],
        labelled_keys: list[str],
    ) -> dict[str, Any]:
        """The teacher as a version of ``<head>_teacher``. The head's lock is taken for the
        write alone, by the write itself (on SQL Server heads.add_version, which decides the
        deployment against the version deployed then): the version number cannot race another
        writer's, and hours of fine-tuning hold no lock that an analyst's deploy or train would
        wait 600 s for. With the keys it was trained and scored on (``labelled_keys``)."""
        params = asdict(self.request.tuning) | {
            "model": self.request.model,
            "test_fraction": self.request.version.test_fraction,
        }
        train_rows, test_rows = split
        deployed = self.store.deployed_model(self.teacher_name)
        fitted = Fitted(
            kind="teacher",
            classes=teacher.classes_,
            params=params,
            metrics=metrics,
            loss_curve=teacher.result_.loss_curve,
            rows_train=int(train_rows.sum()),
            rows_test=int(test_rows.sum()),
            blob=blob,
            onnx=None,  # the blob is the ONNX graph already: not stored twice (MPNet: 438 MB)
            parameters=teacher.n_parameters_,
        )
        row = version_row(
            fitted,
            started=self.started,
            deploy=self.request.version.deploy,
            deployed_macro_f1=deployed.macro_f1 if deployed else None,
        )
        return record_version(
            self.store,
            self.teacher_name,
            self.embedding_set,
            pd.Series(row),
            self.request.version,
            labelled=labelled_keys,
        )

    def student(self, student: str, stage: str) -> dict[str, Any]:
        """Distil ``student`` from the stored soft labels, on the captured rows (never the
        caller's queries), as ``sqlheads distill --teacher`` would."""
        self.progress(0, None, f"{stage}: {student}")
        request = self.request
        chosen: dict[str, Any] = {}
        if student == "encoder":  # the teacher's tokens and steps, on the job's device
            chosen = {
                "student_model": request.student_model,
                "layers": request.student_layers,
                "max_length": request.tuning.max_length,
                "max_steps": request.tuning.max_steps,
                "device": str(self.device),
                "work_dir": str(self.work_dir / "encoder_student"),
            }
        params = Distillation(
            student_params=kinds.student_params(student, **chosen),
            learning=DistillParams(seed=request.tuning.seed),
            version=request.version,
        )
        teaching = Teaching(
            labels=self.captured,
            source=self.captured,
            teacher=self.teacher_name,
            transfer_rows=request.transfer_rows,  # the ones scored above, cached
        )
        return distill(
            self.store,
            head=self.head,
            set_name=self.embedding_set.name,
            teaching=teaching,
            params=params,
            progress=self.progress,
        )


class _Probabilities:
    """The fine-tuned teacher in memory (on its device) as a :class:`Teacher` scores text."""

    def __init__(self, teacher: Any) -> None:
        self.teacher = teacher
        self.classes_ = list(teacher.classes_)

    def predict_proba(self, texts: Any) -> np.ndarray:
        from sqlheads.engine.encoders.text_classifier import softmax

        return softmax(self.teacher.logits(list(texts)))


def _fine_tuning_metrics(teacher: Any, parity: float, device: Any, blob: bytes) -> dict[str, Any]:
    """How the fine-tuning ran, recorded beside the teacher's held-out metrics."""
    result = teacher.result_
    return {
        "parity_max_abs_diff": parity,
        "steps": result.steps,
        "resumed_from_step": result.resumed_from,
        "stopped_early": result.stopped_early,
        "best_validation_loss": result.best_validation_loss,
        "compiled": result.compiled,
        "bf16": result.bf16,
        "device": str(device),
        "fine_tune_seconds": round(result.seconds, 3),
        "blob_bytes": len(blob),
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
