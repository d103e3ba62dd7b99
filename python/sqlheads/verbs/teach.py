"""``distill --teacher-head``: a head's deployed version teaches, on the CPU as on a GPU (the
embedded half of :mod:`sqlheads.compute.teach`, which does the same in SQL Server's Python).

The teacher is whatever version of head H is deployed: a frozen-encoder head (its texts are
embedded with its own encoder first) or a text model such as a sidecar's fine-tuned teacher.
It scores the student's own rows (a head reuses the vectors its set stored for the same text,
so a teacher trained on the student's rows costs no embedding) and the transfer rows built
from the rows the student may learn from (:mod:`engine.students.transfer`). Transfer rows and
their soft labels are cached by teacher version and recipe (:mod:`sqlheads.store.transfer_cache`),
so a second student of the same teacher and rows scores nothing. What was scored and how long
it took is reported back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from sqlheads.compute import teach as teach_half
from sqlheads.compute.columns import present, text_sha256
from sqlheads.engine.encoders.onnx_encoder import EncoderRef
from sqlheads.engine.kinds import model_kind
from sqlheads.engine.progress import Progress, after
from sqlheads.engine.students.soft_labels import Teacher, as_logits
from sqlheads.engine.students.transfer import TransferRecipe, transfer_keys
from sqlheads.errors import ClassMismatchError, NotFoundError, TeacherNotDeployedError
from sqlheads.store import transfer_cache
from sqlheads.store.repository import EmbeddingSet, Encoder, Model, Store, validate_name
from sqlheads.store.vectors import HALF_DTYPE, pack_rows
from sqlheads.verbs.encoders import encoder_ref
from sqlheads.verbs.rows import RowSource, text_source

CACHE_CHUNK = 1024  # transfer rows scored and committed at a time


@dataclass
class TeacherHead:
    """A version that teaches: a head's deployed one, or a stored teacher's fine-tuned one.
    The model itself is loaded only when something is left to score."""

    head: str
    model: Model
    classes: list[str]
    store: Store = field(repr=False)
    seconds: dict[str, float] = field(default_factory=dict)
    scored: dict[str, int] = field(default_factory=dict)
    loaded: Teacher | None = field(default=None, repr=False)  # given, or loaded when needed

    @property
    def teacher(self) -> Teacher:
        if self.loaded is None:
            self.loaded = _load(self.store, self.model)
        return self.loaded

    def report(self) -> dict[str, Any]:
        return {
            "teacher_head": self.head,
            "teacher_version": self.model.version,
            "teacher_kind": self.model.kind,
            "teacher_rows_scored": dict(self.scored),
            "teacher_seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


def load_teacher_head(store: Store, head: str) -> TeacherHead:
    """Head ``head``'s deployed version; 50001 if it has no version, 50027 if none deployed."""
    validate_name("head", head)
    model = store.deployed_model(head)
    if model is None:
        versions = store.read_view("model_summary", head=head)
        if versions.empty:
            raise NotFoundError(
                f"teacher head {head!r} does not exist: train it first (e.g. `sqlheads train "
                f"--head {head} --set SET --labels QUERY` on a set embedded with "
                "all-mpnet-base-v2), or name another head with --teacher-head"
            )
        raise TeacherNotDeployedError(
            f"teacher head {head!r} has {len(versions)} version(s) but none is deployed: a "
            f"teacher teaches with its deployed version; deploy one with `sqlheads deploy --head "
            f"{head} --version N`"
        )
    return teacher_version(store, model.model_id)


def teacher_version(store: Store, model_id: int) -> TeacherHead:
    """The version ``model_id`` as a teacher (a sidecar teacher's, named by its soft labels)."""
    model = store.model_by_id(model_id)
    classes = json.loads(store.model_record(model_id)["classes_json"])
    return TeacherHead(model.head, model, [str(c) for c in classes], store)


def _load(store: Store, model: Model) -> Teacher:
    """The model, and for one that reads vectors the encoder its set was embedded with, in
    that set's long-text mode."""
    blob, long_text, encoder = store.model_blob(model.model_id), "window", None
    if model_kind(model.kind).reads == "vector":
        encoder = encoder_ref(store, store.encoder(model.encoder_id))
        versions = store.read_view("model_summary", head=model.head)
        trained_on = versions[versions["model_id"] == model.model_id]["set_name"]
        found = store.find_set(str(trained_on.iloc[0])) if len(trained_on) else None
        long_text = found.long_text if found else long_text
    return teach_half.load_teacher(blob, model.kind, encoder, long_text)


def refuse_other_classes(teacher: TeacherHead, classes: list[str]) -> None:
    """50020 unless the teacher's classes are the student's gold labels' classes."""
    if sorted(teacher.classes) != sorted(classes):
        raise ClassMismatchError(
            f"teacher head {teacher.head!r} (version {teacher.model.version}) predicts classes "
            f"{sorted(teacher.classes)} but the student's labels have {sorted(classes)}: a "
            "teacher must know the student's classes; pass a --teacher-head trained on the "
            "same labels"
        )


def own_soft_labels(
    store: Store, teacher: TeacherHead, texts: Mapping[str, str], progress: Progress | None
) -> pd.DataFrame:
    """The teacher's logits for the student's own rows (``item_key``, ``logits`` bytes) and,
    for a teacher that reads vectors, its encoder's vector of each row (``vector``, float16
    bytes; None for a teacher that reads text), as SQL Server's half scores them
    (:func:`sqlheads.compute.teach.teacher_logits`): a head reuses the vectors its set holds
    for a key whose stored text is the same text; the rest are scored now, in key order (the
    same batches whatever order the rows came in)."""
    started = time.perf_counter()
    keys = sorted(k for k, t in texts.items() if t is not None and str(t).strip())
    stored: list[tuple[Any, Any]] = [(None, None)] * len(keys)
    if model_kind(teacher.model.kind).reads == "vector":
        hashes = store.stored_hashes(teacher.model.set_id, keys)
        same = [k for k in keys if hashes.get(k) == text_sha256(str(texts[k]))]
        vectors = store.vectors_for_keys(teacher.model.set_id, same)
        stored = [(hashes.get(k), vectors.get(k)) for k in keys]
    logits, embedded, reused = teach_half.teacher_logits(
        teacher.teacher,
        [str(texts[k]) for k in keys],
        stored,
        progress,
        f"teacher {teacher.head}: the student's rows",
    )
    teacher.scored["own_rows_from_stored_vectors"] = reused
    teacher.scored["own_rows_scored"] = len(keys) - reused
    teacher.seconds["own_rows"] = time.perf_counter() - started
    return pd.DataFrame(
        {"item_key": keys, "logits": pack_rows(logits), "vector": _half(embedded, len(keys))}
    )


def _half(vectors: np.ndarray | None, rows: int) -> list[bytes | None]:
    """Each row's vector as float16 bytes (a teacher's vectors, as the cache keeps them);
    None for every row when the teacher made none."""
    return [None] * rows if vectors is None else pack_rows(vectors, HALF_DTYPE)


def transfer_soft_labels(
    store: Store,
    teacher: TeacherHead,
    origin: Mapping[str, str],
    recipe: TransferRecipe,
    student_encoder: EncoderRef,
    progress: Progress | None,
    exclude: list[str] | None = None,
) -> pd.DataFrame:
    """Transfer rows made from ``origin`` (key -> text: rows the student may learn from, never
    held-out ones) with the teacher's logits and its encoder's vectors: ``text``,
    ``origin_key``, ``how``, ``logits``, ``vector`` (float16 bytes, None where it made none).

    ``student_encoder`` (its sha256 and bytes) supplies the replacement words
    (:func:`sqlheads.compute.teach.transfer_rows`, as SQL Server's half makes them).
    Cached rows are read back; the missing ones are built, scored and cached in chunks, each
    reported to ``progress`` as it is scored (its stage is the caller's)."""
    started = time.perf_counter()
    if recipe.rows == 0 or not origin:
        teacher.scored |= {"transfer_rows_cached": 0, "transfer_rows_scored": 0}
        return pd.DataFrame(columns=["text", "origin_key", "how", "logits", "vector"])
    cached = transfer_cache.open_transfer_set(
        store,
        model_id=teacher.model.model_id,
        teacher=teacher.head,
        recipe_key=recipe.key(origin, student_encoder.sha256 or "", exclude or ()),
        recipe=asdict(recipe),
        classes=teacher.classes,
    )
    wanted = cached.rows_for(recipe.rows)
    done = transfer_cache.scored_ordinals(store, cached)
    todo: list[int] = [i for i in range(wanted) if i not in done]
    if todo:
        built_started = time.perf_counter()
        rows = teach_half.transfer_rows(
            origin, exclude or [], replace(recipe, rows=wanted), student_encoder
        )
        if len(rows) < wanted:  # the rows cannot give that many distinct ones
            cached = transfer_cache.note_rows_max(store, cached, teacher.head, len(rows))
            wanted = len(rows)
            todo = [i for i in todo if i < wanted]
        teacher.seconds["transfer_build"] = time.perf_counter() - built_started
        scoring_started = time.perf_counter()
        for start in range(0, len(todo), CACHE_CHUNK):
            chunk = todo[start : start + CACHE_CHUNK]
            texts = [rows[i].text for i in chunk]
            probabilities, vectors = teacher.teacher.scored(
                texts, after(progress, start, len(todo))
            )
            transfer_cache.add_transfer_rows(
                store,
                cached,
                teacher.head,
                [
                    {
                        "ordinal": i,
                        "origin_key": rows[i].origin_key,
                        "how": rows[i].how,
                        "text": rows[i].text,
                        "logits": blob,
                        "vector": vector,
                    }
                    for i, blob, vector in zip(
                        chunk,
                        pack_rows(as_logits(probabilities)),
                        _half(vectors, len(chunk)),
                        strict=True,
                    )
                ],
            )
        teacher.seconds["transfer_scoring"] = time.perf_counter() - scoring_started
    teacher.scored["transfer_rows_scored"] = len(todo)
    teacher.scored["transfer_rows_cached"] = wanted - len(todo)
    found = transfer_cache.read_transfer_rows(store, cached, wanted)
    teacher.seconds["transfer_rows"] = time.perf_counter() - started
    return found[["text", "origin_key", "how", "logits", "vector"]]


@dataclass
class Taught:
    """What ``distill --teacher-head`` hands the student: soft labels of its own rows, the
    transfer rows with theirs, and the report of what the teacher scored."""

    teacher: TeacherHead
    soft: pd.DataFrame  # item_key, logits (bytes, the teacher's classes' order), vector
    # item_key (made up, never a real key), text, logits, origin_key, vector (float16 or None)
    transfer: pd.DataFrame
    report: dict[str, Any]

    @property
    def teacher_name(self) -> str:
        """The name its soft labels are stored under unless the caller gives one."""
        return f"{self.teacher.head}.v{self.teacher.model.version}"

    def with_transfer_rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (distill's input) with the transfer rows after its own: no gold label,
        the teacher's logits and vectors, their text, and chosen for distillation when rows
        are chosen."""
        if self.transfer.empty:
            return frame
        extra = pd.DataFrame(
            {
                "item_key": self.transfer["item_key"],
                "label": None,
                "logits": self.transfer["logits"],
                "teacher_vector": self.transfer["vector"],
                "text": self.transfer["text"],
            }
        )
        if "in_transfer" in frame.columns:
            extra["in_transfer"] = 1
        return pd.concat([frame, extra], ignore_index=True)

    def require_teacher(self) -> None:
        """50028 if the teacher's version was dropped since it scored the rows."""
        transfer_cache.require_teacher(
            self.teacher.store, self.teacher.model.model_id, self.teacher.head
        )


@dataclass(frozen=True)
class StudentRows:
    """A student's side of a teaching version (``distill --teacher-head``, or a sidecar's
    fine-tuned teacher): its set and the set's encoder (whose token embeddings supply the
    transfer rows' replacement words), its gold labels, its texts (``source``, or the set's own
    source query), the recipe of its transfer rows, the held-out share ``train`` holds out of
    those labels (at the recipe's seed), and who hears of the rows the teacher scores."""

    store: Store
    embedding_set: EmbeddingSet
    set_encoder: Encoder
    labelled: pd.DataFrame
    source: RowSource | None
    recipe: TransferRecipe
    test_fraction: float
    progress: Progress | None = None

    def taught(self, teacher: TeacherHead, soft: pd.DataFrame | None = None) -> Taught:
        """Soft labels from ``teacher`` for every row with a text (labelled, held out or not,
        and unlabelled; ``soft``: those it stored earlier, a sidecar teacher's), and the
        recipe's transfer rows made from those the student may learn from: never from a
        held-out row, and never equal to a held-out row's text."""
        store, labelled = self.store, self.labelled
        texts = text_source(store, self.embedding_set, self.source).texts()
        gold = labelled["label"][present(labelled["label"], "text")]
        refuse_other_classes(teacher, sorted({str(v) for v in gold}))
        usable = {k: str(t) for k, t in texts.items() if t is not None and str(t).strip()}
        if soft is None:
            soft = own_soft_labels(store, teacher, usable, self.progress)
        origin, exclude = teach_half.learnable(
            usable,
            (labelled["item_key"].tolist(), labelled["label"].tolist()),
            self.test_fraction,
            self.recipe.seed,
        )
        if self.progress is not None and self.recipe.rows:
            self.progress(0, None, f"teacher {teacher.head}: transfer rows")
        student_encoder = encoder_ref(store, self.set_encoder, with_bytes=True)
        made = transfer_soft_labels(
            store, teacher, origin, self.recipe, student_encoder, self.progress, exclude
        )
        taken = set(usable) | set(labelled["item_key"]) | set(soft["item_key"])
        made.insert(0, "item_key", transfer_keys(taken, len(made)))
        report = teacher.report() | {
            "transfer_rows": len(made),
            "transfer_recipe": asdict(self.recipe),
        }
        return Taught(teacher, soft, made, report)
