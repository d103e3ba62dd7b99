"""The embedded host: what SQL Server's procedures do, done against any SQLAlchemy database.

Each verb runs the caller's query through the store, calls the :mod:`sqlheads.procedures`
function with the rows as a DataFrame, and writes its output back, in batches that commit on
their own so that a process killed half-way loses at most the batch in flight.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import pandas as pd
from sqlalchemy.exc import IntegrityError

from sqlheads import baselines, procedures, settings
from sqlheads.caller_rows import (
    read_labels,
    read_soft_labels_query,
    read_texts,
    refuse_foreign_keys,
    refuse_foreign_teacher,
    text_chunks,
    text_source,
    vector_chunks,
)
from sqlheads.encoders import encoder_arguments, resolve_encoder
from sqlheads.engine.heads import HeadParams
from sqlheads.engine.kinds import DEFAULT_STUDENT, model_kind, student_kind
from sqlheads.errors import (
    EncoderMismatchError,
    InvalidParameterError,
    NotFoundError,
    QueryShapeError,
)
from sqlheads.redeploy import add_version, deploy_model
from sqlheads.store import job_inputs, migrations
from sqlheads.store.keys import key_problem, required_keys
from sqlheads.store.repository import (
    HEAD_BUSY,
    SET_BUSY,
    EmbeddingSet,
    Encoder,
    Store,
    validate_name,
)
from sqlheads.store.soft_labels import (
    find_teacher,
    read_soft_labels,
    store_soft_labels,
)

DEFAULT_ENCODER = settings.DEFAULT_ENCODER  # decided once, in settings (SETTINGS)
DEFAULT_URL = "sqlite:///sqlheads.db"
LOCK_TIMEOUT_MS = int(settings.SETTINGS["lock_timeout_ms"].default)  # as heads.* wait

Progress = Callable[[int, int | None], None]  # (rows just done, total rows or None)
Stage = Callable[[str], None]  # what a long call is doing now, e.g. exporting the encoder
Verb = TypeVar("Verb", bound=Callable[..., Any])


def _holding(*locks: tuple[str, bool]) -> Callable[[Verb], Verb]:
    """Run a verb holding the application locks the T-SQL verb of its name takes, by name and
    by mode (heads.take_lock's table): each ``(kind, shared)``, on the verb's set
    (``set_name``: kinds ``embed``, ``set``) or head (``head``: ``head``, ``head.use``).
    ``embed`` does not wait (a second embedding of a set fails at once), the others wait up to
    the call's ``lock_timeout_ms``; then :class:`~sqlheads.errors.BusyError`."""

    def decorate(verb: Verb) -> Verb:
        @functools.wraps(verb)
        def locked(store: Store, **arguments: Any) -> Any:
            wait = arguments.get("lock_timeout_ms", LOCK_TIMEOUT_MS)
            with contextlib.ExitStack() as held:
                for kind, shared in locks:
                    on_set = kind in ("embed", "set")
                    name = validate_name(
                        "set" if on_set else "head", arguments["set_name" if on_set else "head"]
                    )
                    held.enter_context(
                        store.lock(
                            kind,
                            name,
                            0 if kind == "embed" else wait,
                            SET_BUSY if on_set else HEAD_BUSY,
                            shared=shared,
                        )
                    )
                return verb(store, **arguments)

        return cast(Verb, locked)

    return decorate


def init(store: Store) -> dict[str, Any]:
    """Create or upgrade every table and view (Alembic ``upgrade head``); harmless to repeat."""
    revision = migrations.migrate(store)
    return {"url": store.engine.url.render_as_string(hide_password=True), "revision": revision}


def check_embedding_set(
    store: Store, set_name: str, encoder: str | None, long_text: str | None
) -> EmbeddingSet | None:
    """The set, if it exists, once the encoder and long-text mode asked for agree with it."""
    embedding_set = store.find_set(set_name)
    if embedding_set is not None:
        chosen = store.encoder(embedding_set.encoder_id)
        if encoder is not None and encoder != chosen.name:
            raise EncoderMismatchError(
                f"set {set_name!r} is embedded with encoder {chosen.name!r}, not {encoder!r}: "
                "vectors of two encoders cannot share a set; embed into a new set name"
            )
        if long_text is not None and long_text != embedding_set.long_text:
            raise InvalidParameterError(
                f"set {set_name!r} embeds long texts with {embedding_set.long_text!r}, not "
                f"{long_text!r}: use a new set name, or drop the set first"
            )
    return embedding_set


def _refuse_a_dropped_set(store: Store, embedding_set: EmbeddingSet) -> None:
    found = store.find_set(embedding_set.name)
    if found is None or found.set_id != embedding_set.set_id:
        raise NotFoundError(
            f"set {embedding_set.name!r} was dropped while this embed ran: nothing more is "
            "written to it; embed again to make it anew"
        )


def _find_or_add_set(store: Store, name: str, chosen: Encoder, long_text: str) -> EmbeddingSet:
    """The set, created now unless another embed part created it a moment ago."""
    try:
        return store.add_set(name, chosen.encoder_id, long_text)
    except IntegrityError:  # a part of the same request won the race: same encoder, same mode
        found = store.require_set(name)
        if found.encoder_id != chosen.encoder_id:
            raise EncoderMismatchError(
                f"set {name!r} was just created with another encoder than {chosen.name!r}: "
                "embed into a new set name"
            ) from None
        return found


@_holding(("embed", False), ("set", True))
def embed(
    store: Store,
    *,
    set_name: str,
    source: str,
    encoder: str | None = None,
    long_text: str | None = None,
    batch_rows: int | None = None,
    batch_size: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    stage: Stage | None = None,
) -> dict[str, Any]:
    """Embed the rows of ``source`` (``item_key``, ``text``) into a set, incrementally.

    One embedding of a set at a time, as ``heads.embed``: ``embed`` Exclusive (another
    embedding of the set fails at once, 50016) and ``set`` Shared (trainings and predictions of
    the set go on beside it; a drop_set waits for it, or it for a drop_set).
    """
    return embed_rows(
        store,
        set_name=set_name,
        source=source,
        encoder=encoder,
        long_text=long_text,
        batch_rows=batch_rows,
        batch_size=batch_size,
        threads=threads,
        progress=progress,
        stage=stage,
        lock_batches=False,  # this whole run holds the set's lock (Shared) already
    )


def embed_rows(
    store: Store,
    *,
    set_name: str,
    source: str,
    encoder: str | None = None,
    long_text: str | None = None,
    batch_rows: int | None = None,
    batch_size: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    stage: Stage | None = None,
    model: Any | None = None,
    captured_job_id: int | None = None,
    lock_batches: bool = True,
) -> dict[str, Any]:
    """:func:`embed` without the set's lock, for the sidecar's embed parts: each embeds the
    rows its request captured for it (parts hold disjoint keys, so their batches never write
    the same rows), with ``model`` (an object with the
    ``OnnxEncoder.encode`` signature, e.g. a PyTorch encoder) instead of the set's ONNX graph
    when given. With ``captured_job_id`` the rows are those the job's request captured
    (:mod:`sqlheads.store.job_inputs`): ``source`` is then only recorded as the set's source
    query, never run (issue 19). Each batch is written holding the set's lock (Shared on SQL
    Server, the name heads.embed and heads.drop_set lock: issue 19, point 3), so a drop of the
    set waits for the batch, and a set dropped between two batches is not written to or made
    again (50001). Everything else, hashing, rejects and writes, is :func:`embed`'s own."""
    started = time.perf_counter()
    validate_name("set", set_name)
    # The same bounds and spellings as heads.embed: both read settings.SETTINGS.
    if long_text is not None:
        long_text = settings.choice("long_text", long_text)
    batch_rows = settings.bounded("embed.batch_rows", batch_rows)
    batch_size = settings.bounded("embed.batch_size", batch_size)
    embedding_set = check_embedding_set(store, set_name, encoder, long_text)
    if embedding_set is not None:
        chosen = store.encoder(embedding_set.encoder_id)
    # The source's first rows come before anything is written: a query that fails or lacks a
    # column is refused with no set created and no encoder registered.
    if captured_job_id is None:
        chunks = store.run_query(source, procedures.EMBED_INPUT, "source", batch_rows)
    else:
        chunks = job_inputs.read_chunks(
            store, captured_job_id, batch_rows, columns=procedures.EMBED_INPUT
        )
    # The query runs as written first: a refused or failing query is reported by its own
    # error, not by the duplicate-key subquery built around it.
    first = next(chunks, None)
    if captured_job_id is None:
        duplicated = store.duplicate_keys(source)
    else:
        duplicated = job_inputs.duplicate_keys(store, captured_job_id)
    if first is None and embedding_set is None:
        # An empty new set would be created silently and trained on later to no avail.
        raise QueryShapeError(
            f"the source query returned no rows: set {set_name!r} was not created; check the "
            "query's FROM and WHERE clauses (embed an existing set again with an empty source "
            "to change nothing)"
        )
    if embedding_set is None:
        # Only the default encoder is exported on first use; another name must be registered.
        first_use = (
            encoder in (None, DEFAULT_ENCODER) and store.find_encoder(DEFAULT_ENCODER) is None
        )
        if stage is not None and first_use:
            stage("exporting the encoder to ONNX (first use only)")
        chosen = resolve_encoder(store, encoder)
    if stage is not None:
        stage(f"embedding {set_name}")
    total = None
    if progress is not None:
        total = (
            store.count_query(source)
            if captured_job_id is None
            else job_inputs.count(store, captured_job_id)
        )
    counts = {"rows_read": 0, "embedded": 0, "unchanged": 0, "rejected": 0, "windowed": 0}
    arguments = encoder_arguments(store, chosen)

    def embed_batch(rows: pd.DataFrame) -> None:
        nonlocal arguments, embedding_set
        keys = rows["item_key"].tolist()
        stored = store.stored_hashes(embedding_set.set_id, keys) if embedding_set else {}
        rows = rows.assign(stored_sha256=[stored.get(k) for k in rows["item_key"]])
        output = procedures.embed(
            rows,
            long_text=embedding_set.long_text if embedding_set else long_text or "window",
            batch_size=batch_size,
            threads=threads,
            encoder=model,
            **arguments,
        )
        arguments = {"encoder_sha256": chosen.sha256}  # cached from now on
        held = (
            store.lock("set", set_name, LOCK_TIMEOUT_MS, SET_BUSY, shared=True)
            if lock_batches
            else contextlib.nullcontext()
        )
        with held:
            if embedding_set is None:  # created with its first batch, never empty if refused
                embedding_set = _find_or_add_set(store, set_name, chosen, long_text or "window")
            else:
                _refuse_a_dropped_set(store, embedding_set)
            store.write_embed_batch(embedding_set.set_id, output)
        rejected = output.loc[output["reject_reason"].notna(), "item_key"]
        rejected_keys = set(rejected)
        rejected_rows = sum(
            key_problem(k) is not None or k in rejected_keys for k in rows["item_key"]
        )
        embedded = len(output) - len(rejected)
        counts["rows_read"] += len(rows)
        counts["embedded"] += embedded
        counts["rejected"] += rejected_rows
        counts["unchanged"] += len(rows) - embedded - rejected_rows
        counts["windowed"] += int((output["windows"].fillna(1) > 1).sum())

    # Every copy of a duplicated key is held back and sent in one last call, which rejects the
    # key whole: the outcome cannot depend on which batch each copy fell into.
    held: list[pd.DataFrame] = []
    for chunk in itertools.chain([first] if first is not None else [], chunks):
        read = len(chunk)
        copies = chunk["item_key"].isin(duplicated)
        held.append(chunk[copies])
        if not copies.all():
            embed_batch(chunk[~copies])
        if progress is not None:
            progress(read, total)
    if duplicated and held:
        embed_batch(pd.concat(held, ignore_index=True))
    if embedding_set is None:  # an empty source: the set exists, with nothing in it yet
        embedding_set = _find_or_add_set(store, set_name, chosen, long_text or "window")
    store.set_source_query(embedding_set.set_id, source)
    seconds = time.perf_counter() - started
    return {
        "set": set_name,
        "encoder": chosen.name,
        "long_text": embedding_set.long_text,
        **counts,
        **store.set_counts(embedding_set.set_id),
        "seconds": round(seconds, 3),
        "rows_per_second": round(counts["embedded"] / seconds, 1) if seconds else None,
    }


@_holding(("set", True))  # the head's lock only while the version is written (add_version)
def train(
    store: Store,
    *,
    head: str,
    set_name: str,
    labels: str,
    encoder: str | None = None,
    deploy: str = settings.DEFAULT_DEPLOY,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
    progress: Progress | None = None,
    source: str | None = None,
    **head_params: Any,
) -> dict[str, Any]:
    """Train a new version of ``head`` on the set's vectors for the keys ``labels`` returns.

    The set is held Shared for the whole run (no drop_set under it), the head's lock only while
    the version is written, as ``heads.train`` holds them: two trainings of one head run side
    by side and each gets its own version number; the deploy decision is made against the
    version deployed when it is written, waiting up to ``lock_timeout_ms`` for the head.
    ``progress`` hears of each epoch: ``(1, epochs)``. The TF-IDF baseline reads the rows'
    text through ``source``, else the set's stored source query (skipped without either).
    """
    embedding_set = store.require_set(set_name)
    set_encoder = store.encoder(embedding_set.encoder_id)
    if encoder is not None and encoder != set_encoder.name:
        raise EncoderMismatchError(
            f"set {set_name!r} holds vectors of encoder {set_encoder.name!r}, not {encoder!r}: "
            "train on a set embedded with that encoder, or drop --encoder"
        )
    labelled = read_labels(store, labels)
    vectors = store.vectors_for_keys(embedding_set.set_id, labelled["item_key"].tolist())
    labelled["vector"] = [vectors.get(k) for k in labelled["item_key"]]
    texts, no_text = baselines.read_texts(store, embedding_set, source, labelled["item_key"])
    if texts is not None:
        labelled["text"] = texts
    deployed = store.deployed_model(head)
    if progress is not None:
        progress(0, head_params.get("epochs", HeadParams.epochs))  # training starts now
    result = procedures.train(
        labelled,
        dim=set_encoder.dim,
        deploy=deploy,
        deployed_macro_f1=deployed.macro_f1 if deployed else None,
        on_epoch=None if progress is None else lambda epochs: progress(1, epochs),
        no_text=no_text,
        **head_params,
    ).iloc[0]
    return record_version(
        store, head, embedding_set, set_encoder, result, deploy, {}, texts, lock_timeout_ms
    )


def record_version(
    store: Store,
    head: str,
    embedding_set: EmbeddingSet,
    set_encoder: Encoder,
    result: pd.Series,
    deploy: str,
    extra: dict[str, Any],
    texts: list[Any] | None = None,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
) -> dict[str, Any]:
    """Store a trained or distilled version and deploy it if its policy says so against the
    version deployed now, under the head's lock (:func:`sqlheads.redeploy.add_version`); the
    summary."""
    against_baseline = baselines.columns(result["metrics_json"])
    written = add_version(
        store,
        {
            "head": head,
            "set_id": embedding_set.set_id,
            "encoder_id": set_encoder.encoder_id,
            **{
                c: result[c]
                for c in procedures.TRAIN_OUTPUT
                if c not in ("deploy", "deploy_reason", "parameters")
            },
            "rows_train": int(result["rows_train"]),
            "rows_test": int(result["rows_test"]),
            "parameters": int(result["parameters"]),
            **against_baseline,
            **extra,
        },
        deploy,
        lock_timeout_ms,
    )
    model, previous = written.model, written.previous_macro_f1
    return {
        "head": head,
        "version": model.version,
        "model_id": model.model_id,
        "kind": model.kind,
        "set": embedding_set.name,
        "encoder": set_encoder.name,
        "classes": json.loads(result["classes_json"]),
        "accuracy": round(float(result["accuracy"]), 4),
        "macro_f1": round(float(result["macro_f1"]), 4),
        "rows_train": int(result["rows_train"]),
        "rows_test": int(result["rows_test"]),
        "parameters": int(result["parameters"]),
        "deployed": written.deployed,
        "previous_deployed_macro_f1": round(previous, 4) if previous is not None else None,
        "params": json.loads(result["params_json"]),
        "seconds": round(float(result["seconds"]), 3),
        **baselines.summary(against_baseline, float(result["accuracy"]), texts),
    }


@_holding(("set", True))  # as train: the head's lock only while the version is written
def distill(
    store: Store,
    *,
    head: str,
    set_name: str,
    labels: str | pd.DataFrame,
    student: str = DEFAULT_STUDENT,
    soft_labels: str | None = None,
    teacher: str | None = None,
    source: str | dict[str, Any] | None = None,
    transfer: str | None = None,
    deploy: str = settings.DEFAULT_DEPLOY,
    threads: int | None = None,
    progress: Progress | None = None,
    **distill_params: Any,
) -> dict[str, Any]:
    """Distil a teacher's soft labels into a new version of ``head`` of kind ``student``.

    Soft labels come from ``soft_labels`` (a SELECT returning ``item_key`` and one column per
    class, stored as teacher ``teacher``, default ``HEAD_teacher``) or from a teacher stored
    earlier (``teacher`` alone). A word student reads the rows' text through ``source``, or the
    set's own last source query; a head student reads the set's vectors. ``transfer`` (a SELECT
    returning ``item_key``) restricts the rows distilled on. A sidecar job passes the rows it
    captured at request time instead of queries: ``labels`` as a frame (``item_key``,
    ``label``) and ``source`` as texts by key; it runs no caller's query (issue 19).
    ``progress`` hears of the student's run in its kind's ``progress_unit`` (epochs, optimiser
    steps or L-BFGS iterations); a caller that counts in totals passes ``on_progress`` instead.
    """
    started = time.perf_counter()
    validate_name("head", head)
    kind = student_kind(student)
    embedding_set = store.require_set(set_name)
    set_encoder = store.encoder(embedding_set.encoder_id)
    labelled = labels if isinstance(labels, pd.DataFrame) else read_labels(store, labels)
    if soft_labels is not None:
        suffix = settings.SETTINGS["teacher.suffix"].default
        name = validate_name("teacher", teacher or f"{head}{suffix}")
        refuse_foreign_teacher(find_teacher(store, name), embedding_set)
        soft, teacher_classes = read_soft_labels_query(store, soft_labels)
        found = None
    elif teacher is not None:
        found = find_teacher(store, teacher)
        if found is None:
            raise NotFoundError(
                f"teacher {teacher!r} has no stored soft labels: store them with "
                "`sqlheads distill ... --soft-labels QUERY --teacher NAME`"
            )
        refuse_foreign_teacher(found, embedding_set)
        name, soft, teacher_classes = (
            found.name,
            read_soft_labels(store, found.teacher_id),
            found.classes,
        )
    else:
        raise InvalidParameterError(
            "distill needs a teacher's soft labels: pass --soft-labels \"SELECT item_key, ... AS "
            '<class>, ..." or --teacher NAME (soft labels stored earlier)'
        )
    keys = list(dict.fromkeys(labelled["item_key"].tolist() + soft["item_key"].tolist()))
    frame = pd.DataFrame({"item_key": keys})
    frame["label"] = frame["item_key"].map(
        dict(zip(labelled["item_key"], labelled["label"], strict=True))
    )
    frame["logits"] = frame["item_key"].map(
        dict(zip(soft["item_key"], soft["logits"], strict=True))
    )
    arguments: dict[str, Any] = {"dim": set_encoder.dim}
    no_text = ""
    if kind.reads == "text":
        texts = (
            source
            if isinstance(source, dict)
            else read_texts(store, text_source(store, embedding_set, source))
        )
        frame["text"] = frame["item_key"].map(texts)
        onnx, tokenizer_json = store.encoder_bytes(set_encoder.encoder_id)
        arguments |= {"tokenizer_json": tokenizer_json, "encoder_onnx": onnx}
        known = set(texts)
    else:
        vectors = store.vectors_for_keys(embedding_set.set_id, keys)
        frame["vector"] = frame["item_key"].map(vectors)
        known = set(vectors)
        texts, no_text = baselines.read_texts(store, embedding_set, source, keys)
        if texts is not None:
            frame["text"] = texts
    if soft_labels is not None:
        refuse_foreign_keys(store, embedding_set, soft["item_key"], known)
    if transfer is not None:
        chosen = {
            k
            for c in store.run_query(transfer, ("item_key",), "transfer")
            for k in required_keys(c["item_key"], "transfer")
        }
        frame["in_transfer"] = frame["item_key"].isin(chosen).astype(int)
    deployed = store.deployed_model(head)
    result = procedures.distill(
        frame,
        student=student,
        teacher_classes_json=json.dumps(teacher_classes),
        deploy=deploy,
        deployed_macro_f1=deployed.macro_f1 if deployed else None,
        threads=threads,
        no_text=no_text,
        **arguments,
        **({} if progress is None else {"on_progress": _increments(progress)}),
        **distill_params,
    ).iloc[0]
    stored = found or store_soft_labels(
        store,
        name,
        embedding_set.set_id,
        teacher_classes,
        soft["item_key"].tolist(),
        soft["logits"].tolist(),
    )
    teacher_accuracy = _none_if_nan(result["teacher_accuracy"])
    summary = record_version(
        store,
        head,
        embedding_set,
        set_encoder,
        result,
        deploy,
        {
            "teacher_id": stored.teacher_id,
            "teacher_accuracy": teacher_accuracy,
        },
        frame["text"].tolist() if "text" in frame.columns else None,
    )
    return summary | {
        "teacher": name,
        "teacher_accuracy": round(teacher_accuracy, 4) if teacher_accuracy is not None else None,
        "rows_without_input": int(result["rows_without_input"]),
        "seconds": round(time.perf_counter() - started, 3),
    }


def _increments(progress: Progress) -> Callable[[int, int], None]:
    """``progress`` (what was just done) fed from reports of what is done so far."""
    reported = 0

    def report(done: int, total: int) -> None:
        nonlocal reported
        progress(done - reported, total)
        reported = done

    return report


def _none_if_nan(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


@_holding(("head.use", True), ("set", True))  # as heads.predict: no drop under it
def predict(
    store: Store,
    *,
    head: str,
    set_name: str,
    version: int | None = None,
    keys: str | None = None,
    source: str | None = None,
    batch_rows: int = 10_000,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Score a set (or the keys a query returns) with the deployed or a named version.

    A head reads the set's stored vectors; a text model (a word student) reads the rows' text
    through ``source``, or the set's own last source query.
    """
    started = time.perf_counter()
    model = store.find_model(head, version)
    kind = model_kind(model.kind)
    embedding_set = store.require_set(set_name)
    if kind.reads == "vector":
        chunks, total = vector_chunks(store, model, embedding_set, keys, source, batch_rows)
    else:
        chunks, total = text_chunks(store, embedding_set, keys, source, batch_rows)
    blob = store.model_blob(model.model_id)
    rows = missing = 0
    for chunk in chunks:
        missing += int(chunk[kind.reads].isna().sum())
        output = procedures.predict(
            chunk, model_sha256=model.sha256, model_blob=blob, kind=model.kind
        )
        store.write_predictions(model.model_id, embedding_set.set_id, output)
        rows += len(output)
        if progress is not None:
            progress(len(chunk), total)
    seconds = time.perf_counter() - started
    return {
        "head": head,
        "version": model.version,
        "model_id": model.model_id,
        "kind": kind.name,
        "set": set_name,
        "rows": rows,
        # Both counts, as heads.predict returns them: one is always 0.
        "keys_without_embedding": missing if kind.reads == "vector" else 0,
        "keys_without_text": missing if kind.reads == "text" else 0,
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows / seconds, 1) if seconds else None,
    }


@_holding(("head", False))
def deploy(
    store: Store, *, head: str, version: int, lock_timeout_ms: int = LOCK_TIMEOUT_MS
) -> dict[str, Any]:
    """Make ``version`` the deployed model of ``head`` (explicit, and recorded)."""
    return deploy_model(store, store.find_model(head, version), settings.REASON_BY_HAND)


@_holding(("head", False))
def roll_back(store: Store, *, head: str, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> dict[str, Any]:
    """Deploy again the model that was deployed before the current one."""
    history = store.deployment_history(head)
    if not history and store.read_view("model_summary", head=head).empty:
        # drop-head leaves no trace of a head, so both causes are named
        raise NotFoundError(
            f"head {head!r} does not exist: it was never trained, or it was dropped "
            "(drop-head deletes a head's versions and deployment history); nothing to "
            f"roll back: train it with `sqlheads train --head {head} ...`"
        )
    if not history:
        raise NotFoundError(
            f"head {head!r} has never been deployed: nothing to roll back; deploy a "
            f"version with `sqlheads deploy --head {head} --version N`"
        )
    previous = next((m for m in history if m != history[0]), None)
    if previous is None:
        raise NotFoundError(
            f"head {head!r} has had only one deployed version: nothing to roll back to; "
            f"deploy another with `sqlheads deploy --head {head} --version N`"
        )
    return deploy_model(store, store.model_by_id(previous), settings.REASON_ROLL_BACK)


def models(store: Store, *, head: str | None = None) -> pd.DataFrame:
    if head is not None:
        validate_name("head", head)
    listed = store.read_view("model_summary", head=head)
    if head is not None and listed.empty:
        raise NotFoundError(
            f"head {head!r} has no versions: train it with `sqlheads train --head {head} ...`, "
            "or list every head with `sqlheads models`"
        )
    return listed
