"""drift: the signals of ``sqlheads drift`` on rows like the training data and on other data.

A Rotten Tomatoes head (``compute.train``, the product's training path: its drift reference
is the one a stored version records) trained on a seeded sample of RT's training split scores:
unseen RT rows (the fixed test split, random subsets: no drift), IMDB reviews (long, from
another site: drift), and RT test rows with a share of IMDB mixed in. For each case and
subset size the table gives the largest value over the resamples of every signal that
``engine/loop/drift.py`` computes, as the ``drift`` view and verb compute them, and how many of the
resamples were flagged by the limits in ``engine/loop/drift.py``. The limits are set from this
table: above every value unseen RT rows gave, below what IMDB gave.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Section, Table, cached_vectors, fmt, save_figure
from sqlheads.report.figures import pyplot

SIZES: dict[str, dict[str, Any]] = {
    "full": {"rt": None, "training": (200, 1_000, 6_824), "subsets": (100, 300, 1_000),
             "resamples": 20, "imdb": 1_000, "mixes": (0.1, 0.25, 0.5)},
    "quick": {"rt": None, "training": (200, 2_000), "subsets": (100, 300), "resamples": 10,
              "imdb": 400, "mixes": (0.25, 0.5)},
    "tiny": {"rt": 400, "training": (200,), "subsets": (40,), "resamples": 2, "imdb": 40,
             "mixes": (0.5,)},
}  # fmt: skip
SIGNALS = ("psi", "confidence_gap", "share_gap", "shift")


def _head(reviews, vectors, rows: int, seed: int = 0):
    """A version trained as ``sqlheads train`` trains it; its model and drift reference."""
    import pandas as pd

    from sqlheads.compute.train import TrainParams
    from sqlheads.compute.train import train as train_version
    from sqlheads.engine.kinds import model_kind
    from sqlheads.store.vectors import pack_rows

    train = reviews[reviews["split"] == "train"].sample(n=rows, random_state=seed)
    frame = pd.DataFrame(
        {
            "item_key": train["item_key"].tolist(),
            "label": train["label"].tolist(),
            "vector": pack_rows(vectors[train.index.to_numpy()]),
        }
    )
    version = train_version(frame, params=TrainParams(), dim=vectors.shape[1]).iloc[0]
    model = model_kind("head").load(bytes(version["blob"]))
    return model, json.loads(version["metrics_json"])["drift"]


def measure(model, found: dict[str, Any], vectors: np.ndarray) -> dict[str, float]:
    """Every signal of a set of rows, as the view and the verb compute them."""
    from sqlheads.engine.loop import drift

    probabilities = model.predict_proba(vectors)
    top = probabilities.max(axis=1)
    classes = list(model.classes_)
    predicted = np.asarray(classes)[probabilities.argmax(axis=1)]
    shares = {c: float(np.mean(predicted == c)) for c in classes}
    return {
        "psi": drift.psi(found["top_probability_shares"], drift.bin_counts(top)),
        "confidence_gap": abs(float(top.mean()) - found["held_out_mean_top_probability"]),
        "share_gap": drift.share_gap(found, shares),
        "shift": drift.embedding_shift(found, vectors.mean(axis=0)),
    }


def run(out_dir: Path, scale: str = "full") -> Section:
    from sqlheads import datasets
    from sqlheads.engine.loop import drift

    size = SIZES[scale]
    reviews = datasets.rotten_tomatoes()
    if size["rt"] is not None:  # a smaller run embeds only its own rows
        reviews = reviews.sample(n=size["rt"], random_state=0).sort_index().reset_index(drop=True)
    rt_vectors, _ = cached_vectors("rt", "int8", reviews["text"].tolist())
    imdb = datasets.imdb()
    imdb = imdb[imdb["split"] == "test"].sample(n=size["imdb"], random_state=0)
    imdb_vectors, _ = cached_vectors("imdb-drift", "int8", imdb["text"].tolist())
    unseen = rt_vectors[(reviews["split"] == "test").to_numpy()]
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for training in size["training"]:
        model, found = _head(reviews, rt_vectors, training)
        cases = {"RT test split": (unseen, 0.0), "IMDB": (imdb_vectors, 1.0)}
        cases |= {f"RT + {share:.0%} IMDB": (None, share) for share in size["mixes"]}
        for case, (source, share) in cases.items():
            for n in size["subsets"]:
                measured = []
                for _ in range(size["resamples"]):
                    if source is None:
                        taken = int(round(n * share))
                        chosen = np.concatenate(
                            [unseen[rng.choice(len(unseen), n - taken, replace=False)],
                             imdb_vectors[rng.choice(len(imdb_vectors), taken, replace=False)]]
                        )  # fmt: skip
                    else:
                        chosen = source[rng.choice(len(source), min(n, len(source)), False)]
                    measured.append(measure(model, found, chosen))
                flagged = sum(
                    drift.judge(found, n, psi=m["psi"], confidence_gap=m["confidence_gap"],
                                share_gap=m["share_gap"], shift=m["shift"]).drifted
                    for m in measured
                )  # fmt: skip
                rows.append(
                    {"training": training, "case": case, "rows": n, "flagged": flagged,
                     "resamples": len(measured), "held_out": found["held_out_rows"]}
                    | {f"max_{k}": max(m[k] for m in measured) for k in SIGNALS}
                    | {f"min_{k}": min(m[k] for m in measured) for k in SIGNALS}
                )  # fmt: skip
    return _section(out_dir, scale, size, rows)


def _section(out_dir: Path, scale: str, size: dict[str, Any], rows: list[dict]) -> Section:
    from sqlheads.engine.loop import drift

    section = Section(
        name="drift",
        title="drift: the signals on unseen Rotten Tomatoes rows against IMDB",
        scale=scale,
        intro=__doc__.split("\n", 2)[2].strip(),
    )
    limits = {"psi": drift.PSI_LIMIT, "confidence_gap": drift.CONFIDENCE_LIMIT,
              "share_gap": drift.SHARE_LIMIT, "shift": drift.SHIFT_LIMIT}  # fmt: skip

    def span(row: dict, signal: str) -> str:
        return f"{row[f'min_{signal}']:.3f}-{row[f'max_{signal}']:.3f}"

    section.tables.append(
        Table(
            f"Signals over {size['resamples']} resamples (min-max) and how many were flagged; "
            f"limits: PSI {drift.PSI_LIMIT} over the PSI of chance, {drift.SCORE_BINS - 1} x "
            f"(1/rows + 1/held-out rows); top-probability gap {drift.CONFIDENCE_LIMIT}, class "
            f"share gap {drift.SHARE_LIMIT}, embedding shift {drift.SHIFT_LIMIT}",
            [
                "trained on (held out)",
                "scored",
                "rows",
                "PSI",
                "top p gap",
                "share gap",
                "shift",
                "flagged",
            ],
            [
                [
                    f"{fmt(r['training'])} ({r['held_out']})",
                    r["case"],
                    fmt(r["rows"]),
                    *(span(r, k) for k in SIGNALS),
                    f"{r['flagged']}/{r['resamples']}",
                ]
                for r in rows
            ],
        )  # fmt: skip
    )
    unseen = [r for r in rows if r["case"] == "RT test split"]
    imdb = [r for r in rows if r["case"] == "IMDB"]
    false_alarms = sum(r["flagged"] for r in unseen)
    caught = sum(r["flagged"] for r in imdb)
    judged = sum(r["resamples"] for r in imdb)
    section.notes.append(
        "Largest value unseen RT rows gave, per signal, against its limit: "
        + ", ".join(
            f"{k} {max(r[f'max_{k}'] for r in unseen):.3f} (limit {limits[k]}"
            + (" over chance)" if k == "psi" else ")")
            for k in SIGNALS
        )
        + "; smallest IMDB gave: "
        + ", ".join(f"{k} {min(r[f'min_{k}'] for r in imdb):.3f}" for k in SIGNALS)
        + ". With 40 held-out rows (a head trained on 200 labels) the PSI of chance is about 0.5"
        " whatever set is scored: a small held-out split's histogram is mostly noise."
    )
    section.headline.append(
        [
            "drift",
            "IMDB sets flagged / unseen RT sets flagged",
            f"{caught}/{judged} / {false_alarms}/{sum(r['resamples'] for r in unseen)}",
        ]  # fmt: skip
    )
    section.plots.append(_plot(out_dir, rows, limits))
    return section


def _plot(out_dir: Path, rows: list[dict], limits: dict[str, float]) -> str:
    """Each subset size's largest value of the two signals, against their limits: the PSI less
    its chance level (what the limit is compared with), and the embedding shift."""
    from sqlheads.engine.loop import drift

    def excess(row: dict) -> float:
        return row["max_psi"] - drift.psi_noise(row["rows"], row["held_out"])

    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    cases = list(dict.fromkeys(r["case"] for r in rows))
    panels = (("PSI less its chance level", excess, "psi", "linear"),
              ("embedding shift", lambda r: r["max_shift"], "shift", "log"))  # fmt: skip
    for ax, (title, value, limit, scale) in zip(axes, panels, strict=True):
        for offset, case in enumerate(cases):
            chosen = [r for r in rows if r["case"] == case]
            ax.scatter([offset] * len(chosen), [value(r) for r in chosen], s=18, color="C0")
        ax.axhline(limits[limit], color="red", linestyle="--", label="limit")
        ax.set_xticks(range(len(cases)), cases, rotation=30, ha="right", fontsize=8)
        ax.set(yscale=scale, title=f"{title}: largest per subset")
        ax.legend(fontsize=8)
    return save_figure(figure, out_dir, "bench-drift.png")
