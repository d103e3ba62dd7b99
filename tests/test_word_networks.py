"""The word student's architectures: each fits, exports with parity, scores a text the same
whatever it is batched with, and keeps to the vocabulary its texts use."""

from __future__ import annotations

import numpy as np
import pytest

from sqlheads.engine.encoders.catalog import catalog_encoder
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.word import architectures
from sqlheads.engine.students.word.architectures import ARCHITECTURES, NAMES
from sqlheads.engine.students.word.network import OTHER, PAD, build_network, compact_vocabulary
from sqlheads.engine.students.word.student import WordStudent, WordStudentParams
from sqlheads.errors import InvalidParameterError


@pytest.fixture(scope="module")
def tokenizer_json() -> str:
    return (catalog_encoder("all-MiniLM-L6-v2").model_dir() / "tokenizer.json").read_text()


def _fit(rt_sample, tokenizer_json: str, **params) -> WordStudent:
    texts = rt_sample["text"].tolist()[:200]
    gold = (rt_sample["label"].to_numpy()[:200] == "positive").astype(int)
    logits = np.stack([1 - gold, gold], axis=1).astype(np.float32) * 3
    return WordStudent(WordStudentParams(**params)).fit(
        texts,
        ["negative", "positive"],
        logits,
        gold,
        tokenizer_json=tokenizer_json,
        distill=DistillParams(epochs=1, batch_size=32),
    )


def _small(arch: str) -> dict:
    """``arch`` at a size that fits in a second: 16 channels, 1,000 bigram buckets."""
    architecture = ARCHITECTURES[arch]
    return (
        {"arch": arch}
        | ({"channels": 16} if architecture.needs_channels else {})
        | ({"buckets": 1000} if architecture.needs_buckets else {})
    )


@pytest.mark.parametrize("params", [_small(arch) for arch in NAMES], ids=lambda p: p["arch"])
def test_each_architecture_scores_a_text_alone_as_in_any_batch(rt_sample, tokenizer_json, params):
    student = _fit(rt_sample, tokenizer_json, **params)
    assert student.parity_max_abs_diff_ is not None and student.parity_max_abs_diff_ <= 1e-4
    short, long = "a gem .", " ".join(rt_sample["text"].tolist()[300:306])
    alone = student.predict_proba([short])
    batched = student.predict_proba([short, long], batch_size=2)  # padded to the long one
    assert np.abs(alone[0] - batched[0]).max() < 1e-5
    loaded = WordStudent.from_bytes(student.to_bytes())
    assert loaded.params.arch == params["arch"]
    assert np.abs(loaded.predict_proba([short]) - alone).max() < 1e-6


def test_the_vocabulary_is_the_tokens_the_texts_use(rt_sample, tokenizer_json):
    table = compact_vocabulary([[5, 7, 7], [9]], vocab_size=12, min_count=1)
    assert table[[5, 7, 9]].tolist() == [2, 3, 4] and table[3] == OTHER
    assert compact_vocabulary([[5]], vocab_size=12, min_count=0).max() == 13  # every token
    used = _fit(rt_sample, tokenizer_json, arch="bag", dim=32)
    every = _fit(rt_sample, tokenizer_json, arch="bag", dim=32, min_count=0)
    # 200 reviews use a few thousand of MiniLM's 30,522 tokens: a fraction of the rows
    assert used.n_parameters_ < every.n_parameters_ / 5
    assert PAD == 0


def test_every_module_of_the_architectures_package_is_registered():
    from pathlib import Path

    modules = {p.stem for p in Path(architectures.__file__).parent.glob("*.py")} - {"__init__"}
    assert modules == set(NAMES) == set(ARCHITECTURES)


def test_architecture_parameters_are_validated_early():
    with pytest.raises(InvalidParameterError, match="arch"):
        WordStudentParams(arch="transformer")
    with pytest.raises(InvalidParameterError, match="buckets"):
        WordStudentParams(arch="ngrams", buckets=0)
    with pytest.raises(InvalidParameterError, match="channels"):
        WordStudentParams(arch="bilstm", channels=0)


@pytest.mark.parametrize("arch", NAMES)
def test_each_architecture_stays_under_a_million_parameters_whatever_the_vocabulary(arch):
    from sqlheads.engine.students.word.student import word_student_params

    p = word_student_params(arch)
    # texts that use every token of MPNet's 30,527: only the most used get rows
    table = compact_vocabulary([list(range(30_527))], 30_527, 1, p.max_vocabulary)
    assert table.max() + 1 == p.max_vocabulary + 2
    net = build_network(ARCHITECTURES[arch], table, 2, 1, p)
    assert 700_000 < sum(t.numel() for t in net.parameters()) < 1_000_000


@pytest.mark.parametrize("arch", NAMES)
def test_tokens_the_student_never_saw_start_as_nothing_like_padding(arch):
    """The OTHER row stands for every token outside the student's vocabulary. When the
    texts use fewer tokens than ``max_vocabulary``, no training token maps to it and it is never
    trained: a random start would add one fixed random vector to every unseen token of a scored
    text, a bias towards one class (a 480-row sample's held-out texts are 19 % such tokens)."""
    from sqlheads.engine.students.word.student import word_student_params

    p = word_student_params(arch)
    table = compact_vocabulary([[5, 7, 7], [9]], 12, 1, p.max_vocabulary)
    net = build_network(ARCHITECTURES[arch], table, 2, 1, p)
    weight = net.embedding.weight.detach()
    assert weight[OTHER].abs().max() == 0 and weight[PAD].abs().max() == 0
    assert weight[2:].abs().max() > 0  # the vocabulary's own tokens start random
    if arch == "ngrams":  # a bucket no training bigram hashes to is never trained either
        assert net.pooling.bigrams.weight.detach().abs().max() == 0


def test_the_fast_tokenising_path_gives_the_full_tokenizers_ids(tokenizer_json):
    """Scoring tokenises without character offsets (``encode_batch_fast``); the ids must be
    those of the full path, cut where it cuts, accents and long texts included."""
    from tokenizers import Tokenizer as RustTokenizer

    from sqlheads import datasets
    from sqlheads.engine.encoders.onnx_encoder import Tokenizer
    from sqlheads.engine.students.word.student import TextTokens

    texts = datasets.imdb()["text"].tolist()[:300] + ["Amélie, naïve 😀 café!", "", "a"]
    full = RustTokenizer.from_str(tokenizer_json)
    full.no_padding()
    full.enable_truncation(256)
    expected = [e.ids for e in full.encode_batch(texts, add_special_tokens=False)]
    assert TextTokens(tokenizer_json, 256).ids(texts) == [ids or [0] for ids in expected]
    full.no_truncation()
    uncut = [e.ids for e in full.encode_batch(texts, add_special_tokens=False)]
    assert max(map(len, uncut)) > 256  # the cut is exercised
    framed = Tokenizer(tokenizer_json, 100_000).encode(texts, truncate=True)
    assert [ids[1:-1] for ids in framed] == uncut
