"""The word-level student: token ids -> a small network (:mod:`.network`) -> classes.

It reads raw text with the encoder's own fast tokenizer and needs no transformer at scoring
time: the fitted network is exported to ONNX together with its tokenisation contract (the
tokenizer JSON, the token limit and the classes, in the graph's metadata), so one blob is enough
to score text with onnxruntime anywhere. Training needs PyTorch and is imported only to fit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from sqlheads.engine.constraints import Interval, OneOf, Params, Rule, param
from sqlheads.engine.encoders.onnx_encoder import pad_ids
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams, fit_student
from sqlheads.engine.students.word.architectures import ARCHITECTURES, NAMES
from sqlheads.engine.students.word.network import build_network, compact_vocabulary
from sqlheads.errors import DimensionMismatchError, ExportParityError, InvalidParameterError

KIND = "word_student"
PARITY_ROWS = 64  # training texts whose ONNX and PyTorch probabilities must agree
PARITY_TOLERANCE = 1e-4
# Initial token embeddings: a PCA of the encoder's input embedding table, of the vectors the
# whole encoder gives each token alone (Model2Vec's static vectors), or random. Model2Vec's did
# not help on Rotten Tomatoes (frozen MPNet head teaching, 6,000 transfer rows, interleaved):
# bag 75.85 % against 76.26 %, cnn 76.67 % against 77.55 %, for 2-3x the fitting time.
INITS = ("encoder", "model2vec", "random")
# Measured on Rotten Tomatoes with the frozen all-mpnet-base-v2 head as teacher and 6,000 to
# 12,000 transfer rows (docs/guides/data-scientist.md, "Without a GPU").
DEFAULT_EPOCHS, DEFAULT_LR = 6, 3e-3


def _needs(what: str):
    def holds(p: WordStudentParams) -> bool:
        return getattr(p, what) > 0 or not getattr(ARCHITECTURES[p.arch], f"needs_{what}")

    return holds


@dataclass(frozen=True)
class WordStudentParams(Params):
    """What the word-level student is made of (see :mod:`.network`, :mod:`.architectures`).

    At a door only ``arch`` is chosen (``distill --arch``): the student is then that
    architecture at its measured size (:meth:`from_flat`); the defaults here are
    :data:`DEFAULT_ARCH`'s."""

    arch: str = param("bag", OneOf(NAMES))
    dim: int = param(64, Interval(int, 1, 1024), door=False)  # token embedding width
    # filters per convolution width, or LSTM units per direction (0: no convolution)
    channels: int = param(64, Interval(int, 0, 4096), door=False)
    hidden: int = param(64, Interval(int, 1, 4096), door=False)
    dropout: float = param(0.3, Interval(float, 0, 1, "left"), door=False)
    # tokens read per text; the rest is ignored
    max_tokens: int = param(256, Interval(int, 8, 8192), door=False)
    # token embeddings to start from
    init: str = param("encoder", OneOf(INITS), door=False)
    # uses in the distilled texts a token needs for a row (0: every token)
    min_count: int = param(1, Interval(int, 0, 1000), door=False)
    buckets: int = param(0, Interval(int, 0, 10_000_000), door=False)  # ngrams: hashed bigrams
    # token rows at most, the most used (None: every token the texts use)
    max_vocabulary: int | None = param(15_000, Interval(int, 1), None, door=False)

    RULES = (
        Rule("channels", _needs("channels"), "is too few for arch={arch!r}: pass at least 1"),
        Rule("buckets", _needs("buckets"), "is too few for arch={arch!r}: pass at least 1"),
    )

    @classmethod
    def built(cls, values: dict[str, Any]) -> WordStudentParams:
        """The architecture a door names (``arch``), at the size it was measured best at."""
        return word_student_params(values.get("arch"))


# Each architecture at the size measured best for it (:mod:`.architectures`).
ARCHITECTURE_SIZES: dict[str, dict[str, int]] = {
    name: architecture.size for name, architecture in ARCHITECTURES.items()
}
# The most accurate of those that score text at least 20 times as fast as MiniLM int8 + head
# (the word student's bound), on a busy Xeon and on a quiet EPYC whose VNNI int8 MiniLM is faster
# (docs/guides/data-scientist.md, "Which word student is the default"); its transfer rows are
# engine.students.transfer.DEFAULT_ROWS.
DEFAULT_ARCH = "bag"


def word_student_params(arch: str | None = None) -> WordStudentParams:
    """The word student of ``arch`` (default :data:`DEFAULT_ARCH`) at its measured size."""
    chosen = DEFAULT_ARCH if arch is None else arch
    return WordStudentParams(arch=chosen, **ARCHITECTURE_SIZES.get(chosen, {}))  # or refused


class TextTokens:
    """The fast tokenizer, without special tokens, cut at ``max_tokens``; padded batches."""

    def __init__(self, tokenizer_json: str, max_tokens: int) -> None:
        from tokenizers import Tokenizer

        self.tokenizer_json = tokenizer_json
        self._tokenizer = Tokenizer.from_str(tokenizer_json)
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_tokens)
        self.pad_id = self._tokenizer.token_to_id("[PAD]") or 0
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        # The fast batch skips character offsets, which nothing here reads: the same ids, in
        # about two thirds of the time, and tokenising is most of a small student's scoring.
        encoded = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [e.ids or [self.pad_id] for e in encoded]

    def pad(self, sequences: Sequence[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        return pad_ids(sequences, self.pad_id)


def encoder_token_embeddings(onnx_bytes: bytes, vocab_size: int) -> np.ndarray | None:
    """The encoder graph's token-embedding matrix (vocab x width), dequantised; None if absent.

    Initialising the student's tokens from the encoder's own measured +1.2 points over random
    initialisation on Rotten Tomatoes: the student starts knowing which tokens are alike.
    """
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(onnx_bytes)
    arrays = {i.name: i for i in model.graph.initializer}
    for name, tensor in arrays.items():
        if len(tensor.dims) != 2 or tensor.dims[0] != vocab_size:
            continue
        matrix = numpy_helper.to_array(tensor).astype(np.float32)
        base = name.removesuffix("_quantized")
        if base != name:  # dynamic int8: (q - zero_point) * scale, per tensor or per channel
            scale = numpy_helper.to_array(arrays[base + "_scale"]).astype(np.float32)
            zero = numpy_helper.to_array(arrays[base + "_zero_point"]).astype(np.float32)
            axis = 0 if scale.size == vocab_size else 1
            shape = (-1, 1) if axis == 0 else (1, -1)
            matrix = (matrix - zero.reshape(shape)) * scale.reshape(shape)
        return matrix
    return None


def encoded_token_embeddings(
    onnx_bytes: bytes, tokenizer_json: str, token_ids: np.ndarray, batch_size: int = 512
) -> np.ndarray:
    """The encoder's sentence vector of each token alone, framed as a text is (Model2Vec's
    static vectors): the encoder's layers fold into it what the token means in use, where its
    input table holds only what it looks like."""
    from sqlheads.engine.encoders.onnx_encoder import Tokenizer, encoder_session

    tokenizer = Tokenizer(tokenizer_json, max_length=16)
    session = encoder_session(onnx_bytes)
    batches = []
    for start in range(0, len(token_ids), batch_size):
        framed = [tokenizer.frame([int(t)]) for t in token_ids[start : start + batch_size]]
        ids, mask = tokenizer.pad(framed)
        batches.append(session.run(None, {"input_ids": ids, "attention_mask": mask})[0])
    width = session.get_outputs()[0].shape[-1]
    return np.concatenate(batches) if batches else np.zeros((0, width), dtype=np.float32)


def initial_token_embeddings(
    init: str, encoder_onnx: bytes, tokens: TextTokens, token_ids: np.ndarray, dim: int
) -> np.ndarray | None:
    """The ``dim``-wide starting rows of ``token_ids`` for ``init`` (:data:`INITS`); None where
    the encoder graph holds no token table to start from."""
    if init == "model2vec":
        encoded = encoded_token_embeddings(encoder_onnx, tokens.tokenizer_json, token_ids)
        return pca_embeddings(encoded, dim)
    table = encoder_token_embeddings(encoder_onnx, tokens.vocab_size)
    return None if table is None else pca_embeddings(table, dim)[token_ids]


def pca_embeddings(matrix: np.ndarray, dim: int) -> np.ndarray:
    """Project token embeddings on their ``dim`` main directions, scaled to unit variance.

    The directions come from the small (width x width) covariance matrix rather than an SVD of
    the whole vocabulary: the same subspace, in a fraction of a second instead of a minute.
    """
    centred = (matrix - matrix.mean(axis=0, keepdims=True)).astype(np.float64)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    projected = centred @ vectors[:, ::-1][:, :dim]
    return (projected / projected.std()).astype(np.float32)


def _with_softmax(net):
    """``net`` returning probabilities instead of logits, for the exported graph."""
    import torch

    class Softmaxed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, input_ids, attention_mask):
            return torch.softmax(self.net(input_ids, attention_mask), dim=1)

    # eval(): the exporter traces the module in its current mode, and a module in training
    # mode would export live dropout (the parity check caught exactly that).
    return Softmaxed().eval()


@dataclass
class FittedTextStudent:
    """What every student that reads text holds once fitted (the word student, the encoder
    student): its classes, loss curve, size, and the ONNX graph that is the model."""

    classes_: list[str] = field(default_factory=list, init=False)
    loss_curve_: list[float] = field(default_factory=list, init=False)
    n_parameters_: int = field(default=0, init=False)
    onnx_: bytes = field(default=b"", init=False, repr=False)
    parity_max_abs_diff_: float | None = field(default=None, init=False)

    # -- persistence: the ONNX graph is the model -------------------------------------------------

    def to_bytes(self) -> bytes:
        return self.onnx_

    def to_onnx(self) -> bytes:
        return self.onnx_


@dataclass
class WordStudent(FittedTextStudent):
    """A fitted word-level student; ``fit`` distils, ``predict_proba`` scores raw texts."""

    params: WordStudentParams = field(default_factory=WordStudentParams)

    def __post_init__(self) -> None:
        self._session = None
        self._tokens: TextTokens | None = None

    def fit(
        self,
        texts: Sequence[str],
        classes: Sequence[str],
        teacher_logits: np.ndarray,
        gold: np.ndarray,
        *,
        tokenizer_json: str,
        encoder_onnx: bytes | None = None,
        distill: DistillParams | None = None,
        progress: Progress | None = None,
    ) -> WordStudent:
        """Distil from ``teacher_logits`` (NaN rows: no soft label) and ``gold`` (class index,
        -1 where unlabelled). ``encoder_onnx`` supplies the token embeddings to start from;
        ``progress`` hears of each epoch."""
        import torch

        p = self.params
        distill = (distill or DistillParams()).with_defaults(DEFAULT_EPOCHS, DEFAULT_LR)
        tokens = TextTokens(tokenizer_json, p.max_tokens)
        ids = tokens.ids(texts)
        torch.manual_seed(distill.seed)
        table = compact_vocabulary(ids, tokens.vocab_size, p.min_count, p.max_vocabulary)
        net = build_network(ARCHITECTURES[p.arch], table, len(classes), tokens.pad_id, p)
        if p.init != "random" and encoder_onnx is not None:
            kept = np.flatnonzero(table > 1)
            start = initial_token_embeddings(p.init, encoder_onnx, tokens, kept, p.dim)
            if start is not None:
                with torch.no_grad():
                    net.embedding.weight[table[kept]] = torch.from_numpy(start)

        def batch_inputs(rows: np.ndarray):
            padded, mask = tokens.pad([ids[i] for i in rows])
            return torch.from_numpy(padded), torch.from_numpy(mask)

        self.loss_curve_ = fit_student(
            net,
            batch_inputs,
            np.asarray(teacher_logits, dtype=np.float32),
            np.asarray(gold),
            distill,
            lengths=np.array([len(s) for s in ids]),
            progress=progress,
        )
        self.classes_ = [str(c) for c in classes]
        self.n_parameters_ = int(sum(t.numel() for t in net.parameters()))
        self.onnx_ = self._export(net, tokens, tokenizer_json)
        self._session, self._tokens = None, None
        self.parity_max_abs_diff_ = self._check_parity(net, tokens, texts[:PARITY_ROWS])
        return self

    def _check_parity(self, net, tokens: TextTokens, texts: Sequence[str]) -> float:
        """The exported graph, tokenising by the contract in its own metadata, must give
        PyTorch's probabilities on a padded batch of mixed lengths."""
        import torch

        ids, mask = tokens.pad(tokens.ids(texts))
        with torch.no_grad():
            expected = torch.softmax(net(torch.from_numpy(ids), torch.from_numpy(mask)), 1).numpy()
        got = self.predict_proba(texts, batch_size=len(texts))
        worst = float(np.abs(got - expected).max()) if len(texts) else 0.0
        if worst > PARITY_TOLERANCE:
            raise ExportParityError(
                f"the word student's ONNX export differs from PyTorch by {worst:.2e} "
                f"(> {PARITY_TOLERANCE}): distil it again, or report the onnxruntime version"
            )
        return worst

    def _export(self, net, tokens: TextTokens, tokenizer_json: str) -> bytes:
        import onnx

        from sqlheads.engine.encoders.text_classifier import trace_text_model

        sample = tokens.pad([[tokens.pad_id + 1] * 3, [tokens.pad_id + 1] * 5])
        model = onnx.load_from_string(trace_text_model(_with_softmax(net), sample, "probabilities"))
        contract = {
            "kind": KIND,
            "classes": json.dumps(self.classes_),
            "tokenizer_json": tokenizer_json,
            "max_tokens": str(self.params.max_tokens),
            "params": json.dumps(asdict(self.params)),
            "parameters": str(self.n_parameters_),
        }
        for key, value in contract.items():
            model.metadata_props.add(key=key, value=value)
        return model.SerializeToString()

    # -- scoring -------------------------------------------------------------------------------

    def predict_proba(self, texts: Sequence[str], batch_size: int = 2048) -> np.ndarray:
        if not self.onnx_:
            raise InvalidParameterError("this student is not fitted: call fit first")
        if self._session is None:
            self._load_session()
        ids = self._tokens.ids(texts)
        out = np.zeros((len(ids), len(self.classes_)), dtype=np.float32)
        # Length-sorted batches waste no arithmetic on padding.
        order = np.argsort([len(s) for s in ids], kind="stable")
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            padded, mask = self._tokens.pad([ids[i] for i in rows])
            out[rows] = self._session.run(None, {"input_ids": padded, "attention_mask": mask})[0]
        if out.shape[1] != len(self.classes_):
            raise DimensionMismatchError(
                f"the student graph returns {out.shape[1]} classes but lists "
                f"{len(self.classes_)}: distil it again"
            )
        return out

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.classes_)[self.predict_proba(texts).argmax(axis=1)]

    def _load_session(self) -> dict[str, str]:
        """One parse of the graph (onnxruntime's), which also reads the contract it carries."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(
            self.onnx_, options, providers=["CPUExecutionProvider"]
        )
        meta = self._session.get_modelmeta().custom_metadata_map
        self._tokens = TextTokens(meta["tokenizer_json"], int(meta["max_tokens"]))
        return meta

    @classmethod
    def from_bytes(cls, blob: bytes) -> WordStudent:
        """A student from its graph alone, ready to score (no ``onnx`` import: a scoring
        process pays for one parse of the graph)."""
        student = cls.__new__(cls)
        student.onnx_ = blob
        meta = student._load_session()
        if meta.get("kind") != KIND:
            raise InvalidParameterError(
                f"this blob is a {meta.get('kind', 'non-sqlheads')!r} model, not a {KIND}"
            )
        student.params = WordStudentParams(**json.loads(meta["params"]))
        student.classes_ = json.loads(meta["classes"])
        student.loss_curve_ = []
        student.n_parameters_ = int(meta["parameters"])
        student.parity_max_abs_diff_ = None
        return student
