"""The probes that chose the encoder student's defaults: which layers a shallower student keeps,
and the feature loss's weight (``python -m bench.dial_probes --db FILE --probe NAME ...``).

Not a benchmark section: it reads a SQLite file where ``sqlheads distill --teacher-head`` has
already cached the teacher's transfer rows with their vectors (the frozen all-mpnet-base-v2
head on Rotten Tomatoes: tables ``rt_reviews`` and set ``rt_mpnet``), fits
:class:`~sqlheads.engine.students.encoder.EncoderStudent` on the training rows and the first
``--transfer-rows`` transfer rows exactly as ``distill`` hands them over (soft labels and
vectors of its own rows from the teacher set's stored vectors), and scores the shipped int8
graph on the fixed split's 1,706 held-out rows. A shallower student starts from its general
stage (``engine.students.general``, built once into ``SQLHEADS_CACHE``) unless
``--general-sentences 0``. Each probe prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time

import numpy as np
import pandas as pd

# name -> (layers, layer choice, feature weight, pooling); "-mean": the mean-pooled classifier
PROBES: dict[str, tuple[int, str, float, str]] = {
    f"L{n}-{choice}-fw{weight:g}{'' if pooling == 'cls' else '-' + pooling}": (
        n, choice, weight, pooling
    )
    for n in (6, 3, 2, 1)
    for choice in ("spread", "first", "spread_to_last")
    for weight in (0.0, 0.1, 0.3, 1.0, 3.0)
    for pooling in ("cls", "mean")
}  # fmt: skip


def teaching_rows(path: str, transfer_rows: int):
    """(texts, logits, vectors, gold) of the rows a student distils on, and the held-out
    (texts, labels), as ``distill --teacher-head rt_teacher --set rt_mpnet`` makes them."""
    from sqlheads import datasets
    from sqlheads.engine.evaluation import held_out_keys
    from sqlheads.store.repository import Store
    from sqlheads.store.vectors import HALF_DTYPE, unpack_rows
    from sqlheads.verbs import teach

    store = Store.from_url(f"sqlite:///{path}")
    rt = datasets.rotten_tomatoes()
    held = held_out_keys(rt["item_key"].tolist(), rt["label"].tolist(), test_fraction=0.2, seed=0)
    teacher = teach.load_teacher_head(store, "rt_teacher")
    soft = teach.own_soft_labels(
        store, teacher, dict(zip(rt["item_key"], rt["text"], strict=True)), None
    )
    soft = soft.set_index("item_key")
    train = rt[~rt["item_key"].isin(held)]
    test = rt[rt["item_key"].isin(held)]
    with sqlite3.connect(path) as c:
        made = pd.read_sql(
            "SELECT text, logits, vector FROM transfer_rows WHERE ordinal < ? ORDER BY ordinal",
            c,
            params=(transfer_rows,),
        )
    texts = train["text"].tolist() + made["text"].tolist()
    logits = unpack_rows(
        soft.loc[train["item_key"], "logits"].tolist() + made["logits"].tolist(), 2
    )
    half = soft.loc[train["item_key"], "vector"].tolist() + made["vector"].tolist()
    vectors = unpack_rows(half, 768, HALF_DTYPE)
    classes = sorted(rt["label"].unique())
    gold = np.array([classes.index(v) for v in train["label"]] + [-1] * len(made))
    store.engine.dispose()
    return (texts, logits, vectors, gold), (test["text"].tolist(), test["label"].to_numpy())


def probe(
    name: str, rows, held_out, distill_params, general_sentences: int | None = None
) -> tuple[dict, object]:
    """One probe's JSON record, and the student it fitted."""
    from sqlheads.engine.students.encoder import EncoderStudent, EncoderStudentParams

    layers, choice, weight, pooling = PROBES[name]
    texts, logits, vectors, gold = rows
    params = EncoderStudentParams(
        layers=layers, layer_choice=choice, feature_weight=weight, pooling=pooling,
        batch_size=64, device="cpu", general_sentences=general_sentences,
    )  # fmt: skip
    started, cpu = time.perf_counter(), time.process_time()
    student = EncoderStudent(params).fit(
        texts, ["negative", "positive"], logits, gold, teacher_vectors=vectors,
        distill=distill_params,
    )  # fmt: skip
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    predicted = np.asarray(student.classes_)[student.predict_proba(held_out[0]).argmax(axis=1)]
    return {
        "probe": name,
        "layers_kept": student.layers_kept_,
        "feature_rows": student.feature_rows_,
        "rows": len(texts),
        "epochs": distill_params.epochs,
        "lr": distill_params.lr,
        "gold_weight": distill_params.gold_weight,
        "temperature": distill_params.temperature,
        "general_sentences": student.general_sentences_,
        "general_seconds": student.general_seconds_,
        "seed": distill_params.seed,
        "steps": student.steps_,
        "accuracy": round(float(np.mean(predicted == held_out[1])), 4),
        "quantization": student.quantization_,
        "fit_seconds": round(seconds, 1),
        "fit_cpu_seconds": round(cpu, 1),
        "load": os.getloadavg(),
    }, student


def main() -> None:
    from sqlheads.engine.students.distillation import DistillParams

    parser = argparse.ArgumentParser(prog="python -m bench.dial_probes", description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--probe", action="append", choices=sorted(PROBES), required=True)
    parser.add_argument("--transfer-rows", type=int, default=6_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--gold-weight", type=float, default=0.0)
    parser.add_argument("--temperature", type=float, default=DistillParams.temperature)
    parser.add_argument(
        "--assistant", choices=sorted(PROBES),
        help="fit this probe's student first (at --assistant-lr, the first seed) and teach the "
        "probes with its logits in the teacher's place (a teacher assistant); the vectors stay "
        "the teacher's",
    )  # fmt: skip
    parser.add_argument(
        "--general-sentences", type=int,
        help="IMDB sentences of a shallower student's general stage (0: none, the task alone; "
        "default: the depth's, engine.students.general.default_sentences)",
    )  # fmt: skip
    parser.add_argument("--assistant-lr", type=float, default=5e-5)  # six layers': LR_WHOLE
    # the training's seed only: the held-out split stays the fixed one (distill's --seed moves both)
    parser.add_argument("--seed", type=int, action="append")
    args = parser.parse_args()

    rows, held_out = teaching_rows(args.db, args.transfer_rows)
    seeds = args.seed or [0]

    def params(lr: float, seed: int) -> DistillParams:
        return DistillParams(
            epochs=args.epochs, lr=lr, gold_weight=args.gold_weight,
            temperature=args.temperature, seed=seed,
        )  # fmt: skip

    if args.assistant:  # it teaches in the teacher's place: its logits, the teacher's vectors
        first = params(args.assistant_lr, seeds[0])
        record, assistant = probe(args.assistant, rows, held_out, first, args.general_sentences)
        print(json.dumps({"assistant": True, **record}), flush=True)
        texts, _, vectors, gold = rows
        rows = texts, np.log(assistant.predict_proba(texts) + 1e-12), vectors, gold
    for seed in seeds:
        for name in args.probe:
            record, _ = probe(name, rows, held_out, params(args.lr, seed), args.general_sentences)
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
