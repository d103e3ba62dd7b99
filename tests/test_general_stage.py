"""The general stage of a shallower encoder student (``engine.students.general``): before the
task, its kept layers learn the whole model's hidden states on IMDB sentences (TinyBERT's layer
map, token by token), once per machine and depth, cached. Real MiniLM weights and real IMDB
sentences, a few CPU steps: the mechanics (the loss's map, the stage moving the layers toward
the whole model, the cache read the second time), not the accuracy (``bench.dial_probes`` and
``python -m bench dial`` measure that).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from sqlheads.engine.encoders.text_classifier import model_directory
from sqlheads.engine.students import general
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.encoder import EncoderStudent, EncoderStudentParams, kept_layers
from sqlheads.engine.students.general import keep_layers
from sqlheads.engine.students.losses import hidden_state_loss
from sqlheads.engine.training.fine_tuning import prepared

MODEL = "all-MiniLM-L6-v2"


def test_a_shallow_students_layers_are_held_to_the_whole_models_uniformly_mapped_layers():
    generator = torch.Generator().manual_seed(0)
    whole = tuple(torch.randn(2, 4, 8, generator=generator) for _ in range(7))  # embeddings + 6
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    mapped = (whole[0], whole[3], whole[6])  # two of six: layers 3 and 6, the last on the last
    assert torch.allclose(hidden_state_loss(mapped, whole, mask), torch.zeros(2), atol=1e-6)
    padded = tuple(state.clone() for state in mapped)
    padded[2][1, 3] = 5.0  # a padding token does not count
    assert torch.allclose(hidden_state_loss(padded, whole, mask), torch.zeros(2), atol=1e-6)
    unmapped = (whole[0], whole[1], whole[2])  # the first two layers are not the map
    assert bool((hidden_state_loss(unmapped, whole, mask) > 0.1).all())


def _distance_to_whole(start: Path, kept: list[int], texts: list[str]) -> float:
    """The hidden-state loss of ``start``'s layers (``kept`` of MiniLM's, or all of a general
    student's) against the whole MiniLM, on ``texts``."""
    from transformers import AutoModel

    model_dir, tokenizer, _ = prepared(MODEL, 32)
    whole = AutoModel.from_pretrained(str(model_dir)).eval()
    student = AutoModel.from_pretrained(str(start)).eval()
    keep_layers(student, kept)
    ids = tokenizer.encode(texts, truncate=True)
    width = max(len(row) for row in ids)
    input_ids = torch.tensor([row + [tokenizer.pad_id] * (width - len(row)) for row in ids])
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in ids])
    with torch.no_grad():
        states = [
            model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
            for model in (student, whole)
        ]
    return float(hidden_state_loss(states[0].hidden_states, states[1].hidden_states, mask).mean())


def test_the_general_stage_brings_the_kept_layers_toward_the_whole_model_once(
    rt_sample: pd.DataFrame, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("SQLHEADS_CACHE", str(tmp_path))  # a cache of its own: built here
    trained = []
    real = general._train

    def counted(*args, **kwargs):  # a spy on the real stage, which still runs
        trained.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(general, "_train", counted)
    kept = kept_layers(6, 2)
    options = {"sentences": 10_000, "max_length": 32, "device": torch.device("cpu")}
    built = general.general_student(MODEL, kept, max_steps=20, **options)
    recipe = json.loads((built / general.RECIPE).read_text(encoding="utf-8"))
    assert recipe["sentences"] == 20 * general.GENERAL_BATCH and recipe["kept"] == [0, 3]
    assert json.loads((built / "config.json").read_text())["num_hidden_layers"] == 2
    texts = rt_sample["text"].tolist()[:64]  # Rotten Tomatoes, not the stage's IMDB
    cut = _distance_to_whole(model_directory(MODEL), kept, texts)
    assert _distance_to_whole(built, [0, 1], texts) < cut - 0.01
    assert general.general_student(MODEL, kept, max_steps=20, **options) == built
    assert trained == [[0, 3]]  # the second call read the cache
    other = general.general_student(MODEL, [0, 2, 4], max_steps=1, **options)
    assert other != built and trained == [[0, 3], [0, 2, 4]]  # another depth, another stage


def test_the_shallowest_students_have_the_longer_stage():
    assert [general.default_sentences(n) for n in range(1, 6)] == [
        general.LONG_STAGE_SENTENCES,
        general.LONG_STAGE_SENTENCES,
        general.GENERAL_SENTENCES,
        general.GENERAL_SENTENCES,
        general.GENERAL_SENTENCES,
    ]
    assert general.LONG_STAGE_SENTENCES > general.GENERAL_SENTENCES


def test_the_imdb_corpus_is_sentences_in_a_seeded_order():
    sentences = general.corpus(500)
    shortest, longest = general.SENTENCE_CHARS
    assert len(sentences) == 500 and len(set(sentences)) > 490
    assert all(shortest <= len(s) <= longest and "<br" not in s for s in sentences)
    assert general.corpus(500) == sentences and general.corpus(500, seed=1) != sentences


def _fit(taught_tiny: pd.DataFrame, **params) -> EncoderStudent:
    student_params = EncoderStudentParams(
        max_length=32, batch_size=8, max_steps=1, device="cpu", **params
    )
    return EncoderStudent(student_params).fit(
        taught_tiny["text"].tolist()[:16],
        ["negative", "positive"],
        taught_tiny[["negative", "positive"]].to_numpy(np.float32)[:16],
        np.full(16, -1),
        distill=DistillParams(epochs=1, lr=5e-5),
    )


def test_only_a_shallower_student_has_a_general_stage_unless_told_none(taught_tiny):
    shallow = _fit(taught_tiny, layers=1)
    assert shallow.general_sentences_ == general.GENERAL_BATCH  # max_steps=1: one batch of it
    assert _fit(taught_tiny, layers=1, general_sentences=0).general_sentences_ == 0
    assert _fit(taught_tiny).general_sentences_ == 0  # six of six layers: the model's own
