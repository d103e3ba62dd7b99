"""Transfer sets: the rows a teacher labels so that a student can see more than the gold rows.

A student distilled only on the teacher's training rows learns little more than their gold
labels say; it needs many more rows that the teacher labels (Tang et al. 2019, "Distilling
Task-Specific Knowledge from BERT into Simple Neural Networks"). :func:`build_transfer` makes
them from the rows a student may learn from (training and unlabelled rows, never held-out
ones):

- **sentences of long rows**: a row of more than ``long_row_words`` words gives each of its
  sentences as a row of its own;
- **augmented copies**, Tang et al.'s three rules: each word is masked with probability
  ``p_mask`` or replaced with probability ``p_replace``; then, with probability ``p_ngram``,
  only an n-gram of 1 to ``ngram_max`` words is kept. Tang et al. replaced a word with another of
  the same part of speech; no tagger is among sqlheads' dependencies, so a word is replaced by
  one of its ``neighbours`` nearest whole-word tokens in the encoder's own (static) token
  embedding matrix (:class:`TokenNeighbours`), which holds words of like use close together.

No SQL here; the caller chooses the rows (and so keeps held-out rows out) and has the teacher
label what comes back.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from sqlheads.engine.constraints import SEED, Interval, Params, Rule, param

# The count of the best word student under the bounds it is held to (under 1M parameters, at
# least 20x MiniLM + head), measured on Rotten Tomatoes with the frozen all-mpnet-base-v2 head
# as teacher (docs/guides/data-scientist.md, "Without a GPU": accuracy against transfer rows):
# bag 77.1 % with 12,000, 76.4 % with none; 24,000 and 48,000 scored no better (76.9, 76.8 %)
# for two and four times the teacher's time. The TF-IDF and encoder students have their own
# (:mod:`sqlheads.engine.kinds`).
DEFAULT_ROWS = 12_000
_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|<br\s*/?>|\n+")
_LETTERS = re.compile(r"^[a-z]{2,}$")
_CONTENT = re.compile(r"\w")


@dataclass(frozen=True)
class TransferRecipe(Params):
    """How transfer rows are made; its :meth:`key` names a cached transfer set. At a door,
    ``rows`` is ``transfer_rows``."""

    # transfer rows at most (0: none)
    rows: int = param(DEFAULT_ROWS, Interval(int, 0, 5_000_000), flat="transfer_rows")
    # a row with more words is split into its sentences
    long_row_words: int = param(40, Interval(int, 1, 100_000))
    # shorter sentences are not worth the teacher's time
    min_sentence_words: int = param(3, Interval(int, 1, 100))
    p_mask: float = param(0.1, Interval(float, 0, 1))
    p_replace: float = param(0.1, Interval(float, 0, 1))
    p_ngram: float = param(0.25, Interval(float, 0, 1))
    ngram_max: int = param(5, Interval(int, 1, 100))
    neighbours: int = param(8, Interval(int, 1, 100))  # replacement candidates per word
    copies_per_row: int = param(20, Interval(int, 1, 1000))  # Tang et al.'s n_iter: at most
    seed: int = param(0, SEED)

    RULES = (
        Rule(
            "p_replace",
            lambda r: r.p_mask + r.p_replace <= 1,
            "is out of range: pass a value in [0, 1 - p_mask], p_mask being {p_mask}",
        ),
    )

    def key(self, origin: Mapping[str, str], words: str = "", exclude: Iterable[str] = ()) -> str:
        """A name for the transfer rows this recipe makes from ``origin`` (key -> text) with
        replacement words from ``words`` (e.g. the encoder's sha256): the same recipe on other
        rows, or rows whose text changed, is another set. ``rows`` is left out: a recipe asking
        for fewer rows makes the first rows of one asking for more (:func:`build_transfer`), so
        one cached set serves every count. ``exclude``: texts no row may equal."""
        digest = hashlib.sha256(json.dumps(asdict(self) | {"rows": None}, sort_keys=True).encode())
        for key in sorted(origin):
            digest.update(f"{len(key)}:{key}{len(origin[key])}:{origin[key]}".encode())
        digest.update(words.encode())
        for text in sorted(_normalised(t) for t in exclude):
            digest.update(f"{len(text)}:{text}".encode())
        return digest.hexdigest()


@dataclass(frozen=True)
class TransferRow:
    text: str
    origin_key: str  # the row it was made from (never a held-out one: the caller's promise)
    how: str  # "sentence" or "augmented"


class TokenNeighbours:
    """Whole-word tokens of an encoder's vocabulary and their nearest neighbours.

    A vocabulary token counts as a word when it is made of two or more letters and the
    tokenizer, given that word alone, returns exactly that token (so ``##ing`` or ``Ġthe``
    pieces are not words, and the word round-trips). Neighbours are ranked by cosine in the
    token embedding matrix, after a projection on its main directions (``dim``) that keeps the
    search cheap.
    """

    def __init__(
        self,
        tokenizer_json: str,
        embeddings: np.ndarray,
        *,
        neighbours: int = TransferRecipe.neighbours,
        words_used: Sequence[str] | None = None,
        dim: int = 128,
    ) -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(tokenizer_json)
        tokenizer.no_padding()
        tokenizer.no_truncation()
        vocabulary = tokenizer.get_vocab(with_added_tokens=False)
        candidates = sorted(
            (token.lower(), index)
            for token, index in vocabulary.items()
            if _LETTERS.match(token.lower()) and index < len(embeddings)
        )
        encoded = tokenizer.encode_batch([w for w, _ in candidates], add_special_tokens=False)
        words = {w: i for (w, i), e in zip(candidates, encoded, strict=True) if e.ids == [i]}
        self.words = sorted(words)
        self.mask_token = _mask_token(tokenizer)
        matrix = embeddings[[words[w] for w in self.words]].astype(np.float64)
        matrix -= matrix.mean(axis=0, keepdims=True)
        _, vectors = np.linalg.eigh(matrix.T @ matrix)
        projected = (matrix @ vectors[:, ::-1][:, :dim]).astype(np.float32)
        projected /= np.maximum(np.linalg.norm(projected, axis=1, keepdims=True), 1e-12)
        wanted = (
            self.words
            if words_used is None
            else sorted({w.lower() for w in words_used} & set(self.words))
        )
        position = {w: i for i, w in enumerate(self.words)}
        self._neighbours: dict[str, list[str]] = {}
        for start in range(0, len(wanted), 2048):
            chunk = wanted[start : start + 2048]
            rows = projected[[position[w] for w in chunk]]
            similarity = rows @ projected.T
            similarity[np.arange(len(chunk)), [position[w] for w in chunk]] = -np.inf
            best = np.argpartition(-similarity, neighbours, axis=1)[:, :neighbours]
            for word, row, top in zip(chunk, similarity, best, strict=True):
                ranked = top[np.argsort(-row[top])]
                self._neighbours[word] = [self.words[i] for i in ranked]
        self.fingerprint = hashlib.sha256(
            json.dumps([self.mask_token, self._neighbours], sort_keys=True).encode()
        ).hexdigest()

    def of(self, word: str) -> list[str]:
        """The word's neighbours, nearest first; none for a word that is not a whole token."""
        return self._neighbours.get(word.lower(), [])


def encoder_neighbours(
    tokenizer_json: str, encoder_onnx: bytes, origin: Mapping[str, str], neighbours: int
) -> TokenNeighbours | None:
    """The replacement words of an encoder's graph for the words of ``origin``'s texts; None
    when the graph holds no token embedding matrix to read them from."""
    from tokenizers import Tokenizer

    from sqlheads.engine.students.word.student import encoder_token_embeddings

    size = Tokenizer.from_str(tokenizer_json).get_vocab_size(with_added_tokens=True)
    embeddings = encoder_token_embeddings(encoder_onnx, size)
    if embeddings is None:
        return None
    words = sorted({w for text in origin.values() for w in str(text).split()})
    return TokenNeighbours(tokenizer_json, embeddings, neighbours=neighbours, words_used=words)


def learnable_rows(
    texts: Mapping[str, object], held_out: set[str]
) -> tuple[dict[str, str], list[str]]:
    """``(origin, exclude)``: the rows transfer rows may be made from (every row with text
    but the held-out ones) and the held-out rows' texts, which no transfer row may equal."""
    usable = {k: str(t) for k, t in texts.items() if t is not None and str(t).strip()}
    origin = {k: t for k, t in usable.items() if k not in held_out}
    return origin, [usable[k] for k in held_out if k in usable]


def transfer_keys(taken: Iterable[str], count: int) -> list[str]:
    """Keys for ``count`` transfer rows inside one distillation, never one of ``taken``."""
    taken = list(taken)
    prefix = "~"
    while any(k.startswith(prefix) for k in taken):
        prefix += "~"
    return [f"{prefix}transfer:{n}" for n in range(count)]


def _mask_token(tokenizer) -> str | None:
    """The tokenizer's own mask token as text (``[MASK]`` for BERT, ``<mask>`` for MPNet and
    RoBERTa: a special token, not a vocabulary word spelt alike), if it has one."""
    for added in tokenizer.get_added_tokens_decoder().values():
        if added.special and "mask" in added.content.lower():
            return added.content
    return None


def _normalised(text: str) -> str:
    """Texts that differ only in case or spacing are the same text to a teacher."""
    return " ".join(str(text).lower().split())


def sentences(text: str, recipe: TransferRecipe) -> list[str]:
    """The sentences of a long row (of more than ``long_row_words`` words); none otherwise."""
    if len(_WORD.findall(text)) <= recipe.long_row_words:
        return []
    parts = (" ".join(p.split()) for p in _SENTENCE_END.split(text))
    return [p for p in parts if len(p.split()) >= recipe.min_sentence_words]


def augment(
    words: Sequence[str],
    recipe: TransferRecipe,
    generator: np.random.Generator,
    neighbours: TokenNeighbours | None,
) -> str:
    """One augmented copy of a row's ``words`` by Tang et al.'s rules (see the module)."""
    mask = neighbours.mask_token if neighbours is not None else None
    out: list[str] = []
    for word, draw in zip(words, generator.random(len(words)), strict=True):
        if draw < recipe.p_mask:
            if mask is not None:
                out.append(mask)
            continue  # with no mask token, a masked word is dropped
        if draw < recipe.p_mask + recipe.p_replace and neighbours is not None:
            core = word.strip(".,!?;:\"'()")
            options = neighbours.of(core)
            if options:
                chosen = options[int(generator.integers(len(options)))]
                out.append(word.replace(core, chosen, 1))
                continue
        out.append(word)
    if out and generator.random() < recipe.p_ngram:
        n = int(generator.integers(1, recipe.ngram_max + 1))
        start = int(generator.integers(0, max(1, len(out) - n + 1)))
        out = out[start : start + n]
    return " ".join(out)


def build_transfer(
    origin: Mapping[str, str],
    recipe: TransferRecipe,
    neighbours: TokenNeighbours | None = None,
    exclude: Iterable[str] = (),
) -> list[TransferRow]:
    """Up to ``recipe.rows`` transfer rows made from ``origin`` (key -> text); the rows made
    for a count are the first rows made for any larger count.

    Sentences of long rows come first (real text), in a seeded order; augmented copies of the
    short rows and of those sentences fill the rest, one round over every one after another (so
    each gets about as many copies) for at most ``copies_per_row`` rounds. A row equal to an
    origin text or to an earlier transfer row is not kept (the teacher scores each text once),
    nor one equal to a text of ``exclude`` (held-out rows: an n-gram of a training row may
    happen to be one), nor one without a letter or digit (a lone comma).
    """
    generator = np.random.default_rng(recipe.seed)
    keys = sorted(origin)  # independent of the caller's order
    seen = {_normalised(str(origin[k])) for k in keys} | {_normalised(t) for t in exclude}
    out: list[TransferRow] = []

    def keep(text: str, key: str, how: str) -> bool:
        if _CONTENT.search(text) and _normalised(text) not in seen:
            seen.add(_normalised(text))
            out.append(TransferRow(text, key, how))
        return len(out) >= recipe.rows

    if recipe.rows == 0:
        return out
    split = [(k, s) for k in keys for s in sentences(str(origin[k]), recipe)]
    for index in generator.permutation(len(split)):
        if keep(split[index][1], split[index][0], "sentence"):
            return out
    # A long row is augmented sentence by sentence: the teacher then scores short texts.
    units = [(k, s) for k, s in split] + [
        (k, str(origin[k])) for k in keys if not sentences(str(origin[k]), recipe)
    ]
    tokenised = [(k, text.split()) for k, text in units]
    tokenised = [(k, words) for k, words in tokenised if words]
    for _ in range(recipe.copies_per_row):
        for index in generator.permutation(len(tokenised)):
            key, words = tokenised[index]
            if keep(augment(words, recipe, generator, neighbours), key, "augmented"):
                return out
    return out
