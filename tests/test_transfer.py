"""Transfer sets (engine): sentences of long rows, Tang et al.'s augmentation with encoder
neighbours, the prefix rule that lets one cached set serve every count, and no held-out text."""

from __future__ import annotations

import pytest

from sqlheads import datasets
from sqlheads.engine.encoders.catalog import catalog_encoder
from sqlheads.engine.students.transfer import (
    TokenNeighbours,
    TransferRecipe,
    build_transfer,
    sentences,
)
from sqlheads.errors import InvalidParameterError


@pytest.fixture(scope="module")
def minilm_neighbours() -> TokenNeighbours:
    """MiniLM's own token embeddings (from its safetensors) and tokenizer."""
    from safetensors.numpy import load_file

    folder = catalog_encoder("all-MiniLM-L6-v2").model_dir()
    weights = load_file(str(folder / "model.safetensors"))
    matrix = next(v for k, v in weights.items() if k.endswith("word_embeddings.weight"))
    words = ["good", "bad", "movie", "funny", "boring", "the", "actor"]
    return TokenNeighbours(
        (folder / "tokenizer.json").read_text(), matrix, neighbours=5, words_used=words
    )


def test_neighbours_are_whole_words_of_like_use(minilm_neighbours: TokenNeighbours):
    assert minilm_neighbours.mask_token == "[MASK]"
    assert "film" in minilm_neighbours.of("movie")
    assert {"hilarious", "humorous", "amusing"} & set(minilm_neighbours.of("funny"))
    assert all(w.isalpha() and not w.startswith("#") for w in minilm_neighbours.of("good"))
    assert minilm_neighbours.of("zzzqqq") == []  # not a vocabulary word: never replaced


def test_long_rows_give_their_sentences_and_short_rows_none():
    recipe = TransferRecipe(long_row_words=10)
    long_row = "A fine start. The middle sags badly.<br /><br />Still, the end is worth it! Go."
    assert sentences(long_row, recipe) == [
        "A fine start.",
        "The middle sags badly.",
        "Still, the end is worth it!",
    ]  # "Go." has fewer than min_sentence_words words
    assert sentences("short and sweet", recipe) == []


def test_augmented_rows_follow_the_recipe_and_a_smaller_count_is_a_prefix(minilm_neighbours):
    train = datasets.rotten_tomatoes().query("split == 'train'").head(200)
    origin = dict(zip(train["item_key"], train["text"], strict=True))
    recipe = TransferRecipe(rows=600, seed=3)
    rows = build_transfer(origin, recipe, minilm_neighbours)
    assert len(rows) == 600
    # RT's few rows of more than 40 words give their sentences first
    assert rows[0].how == "sentence"
    assert sum(r.how == "augmented" for r in rows) > 500
    assert {r.origin_key for r in rows} <= set(origin)
    texts = [r.text for r in rows]
    assert len(set(texts)) == len(texts)  # the teacher scores each text once
    assert not set(texts) & set(origin.values())
    assert sum("[MASK]" in t for t in texts) > 100  # masking
    short = [t for t in texts if len(t.split()) <= 5]
    assert len(short) > 0.1 * len(texts)  # n-gram sampling keeps a few words
    fewer = build_transfer(origin, TransferRecipe(rows=250, seed=3), minilm_neighbours)
    assert [r.text for r in fewer] == texts[:250]
    assert recipe.key(origin, "enc") == TransferRecipe(rows=250, seed=3).key(origin, "enc")
    assert recipe.key(origin, "enc") != TransferRecipe(rows=250, seed=4).key(origin, "enc")
    changed = origin | {train["item_key"].iloc[0]: "another text"}
    assert recipe.key(changed, "enc") != recipe.key(origin, "enc")


def test_no_transfer_row_is_a_held_out_text_even_by_chance():
    """An n-gram of a training row can happen to be a whole held-out row: it is never kept."""
    origin = {"a": "a dull and lifeless film", "b": "dull , flat and lifeless"}
    held_out = ["dull", "lifeless", "a dull"]
    rows = build_transfer(origin, TransferRecipe(rows=200, p_ngram=1.0, ngram_max=2), None)
    assert {"dull", "lifeless"} & {r.text for r in rows}  # the rule does make them...
    kept = build_transfer(
        origin, TransferRecipe(rows=200, p_ngram=1.0, ngram_max=2), None, exclude=held_out
    )
    assert kept and not {r.text for r in kept} & set(held_out)  # ...and they are left out


def test_a_recipe_is_validated_early():
    with pytest.raises(InvalidParameterError, match="p_replace"):
        TransferRecipe(p_mask=0.6, p_replace=0.6)
    with pytest.raises(InvalidParameterError, match="rows"):
        build_transfer({"a": "text"}, TransferRecipe(rows=-1))
    assert build_transfer({"a": "some text here"}, TransferRecipe(rows=0)) == []
