"""The TF-IDF student: a linear model on bounded TF-IDF word 1-2 grams of the whole text.

Made for long texts. A transformer, and the word student, read the first 256 tokens of a review
that often runs past 1,000; TF-IDF reads every word. This student keeps TF-IDF's reach and learns
from the teacher's soft labels (KL at a temperature, plus gold cross-entropy), minimised by
L-BFGS over the whole training set (a convex loss: no epochs, no learning rate).

Serialised without pickle as ``.npz`` (the vocabulary, idf, weights, bias, classes and the
parameters as JSON) and scored with scikit-learn's analyser and NumPy, so SQL Server's Python
scores it exactly as the embedded host does. It has no ONNX export (``to_onnx`` is None):
scikit-learn's regex tokeniser and n-grams have no exact ONNX counterpart.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from sqlheads.engine.baseline import MAX_FEATURES, MIN_DF, NGRAMS, tfidf_features
from sqlheads.engine.constraints import Interval, Params, param
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.errors import InvalidParameterError

KIND = "tfidf_student"
MAX_ITERATIONS = 300  # L-BFGS stopped after 25-91 iterations on IMDB's 20,000 reviews


@dataclass(frozen=True)
class TfidfStudentParams(Params):
    """What the TF-IDF student is made of: at most ``max_features`` word 1-2 grams (the
    baseline's bound), an ``l2`` penalty, and L-BFGS's iterations at most; a door chooses
    none of it."""

    max_features: int = param(MAX_FEATURES, Interval(int, 1_000, 2_000_000), door=False)
    # penalty on the squared weights, per training set (not per row)
    l2: float = param(1e-5, Interval(float, 0, 1, "left"), door=False)
    max_iterations: int = param(MAX_ITERATIONS, Interval(int, 1, 10_000), door=False)


class TfidfStudent:
    """``fit`` on texts and soft labels; ``predict_proba`` on texts; ``to_bytes`` as .npz."""

    def __init__(self, params: TfidfStudentParams | None = None) -> None:
        self.params = params or TfidfStudentParams()
        self.classes_: list[str] = []
        self.loss_curve_: list[float] = []
        self.vectorizer_ = None  # fitted, or rebuilt from the stored vocabulary and idf

    def fit(
        self,
        texts: Sequence[str],
        classes: Sequence[str],
        teacher_logits: np.ndarray,
        gold: np.ndarray,
        *,
        distill: DistillParams | None = None,
        progress: Progress | None = None,
    ) -> TfidfStudent:
        """``teacher_logits``: (rows, classes), NaN rows without soft labels; ``gold``: class
        indices, -1 where a row has none. The loss is ``distillation_loss``'s, in NumPy.
        ``progress(done, at_most, None)`` hears of each L-BFGS iteration; once it has converged,
        ``(done, done)``: the run is complete, in fewer iterations than allowed."""
        from scipy.optimize import minimize

        distill = distill or DistillParams()
        if len(texts) == 0:
            raise InvalidParameterError("no rows to distil a TF-IDF student on")
        vectorizer = tfidf_features(self.params.max_features, MIN_DF if len(texts) >= 1_000 else 1)
        X = vectorizer.fit_transform([str(t) for t in texts]).tocsr()
        loss = _Loss(X, teacher_logits, gold, len(classes), distill, self.params.l2)
        at_most, iterations = self.params.max_iterations, 0

        def iterated(_result) -> None:
            nonlocal iterations
            iterations += 1
            progress(iterations, at_most, None)

        found = minimize(
            loss,
            np.zeros(loss.size),
            jac=True,
            method="L-BFGS-B",
            callback=None if progress is None else iterated,
            options={"maxiter": at_most},
        )
        if progress is not None:
            progress(int(found.nit), int(found.nit), None)
        weights, bias = loss.unpack(found.x)
        self.vectorizer_ = vectorizer
        self.vocabulary_ = vectorizer.get_feature_names_out().astype(str)
        self.idf_ = vectorizer.idf_.astype(np.float32)
        self.weights_ = {"w": weights.astype(np.float32), "b": bias.astype(np.float32)}
        self.classes_ = [str(c) for c in classes]
        self.loss_curve_ = loss.curve
        self.iterations_ = int(found.nit)
        self.n_parameters_ = int(weights.size + bias.size)
        return self

    def _features(self, texts: Sequence[str]):
        """The fitted features, rebuilt from the stored vocabulary and idf (once per model)."""
        if self.vectorizer_ is None:
            from sklearn.feature_extraction.text import TfidfVectorizer

            self.vectorizer_ = TfidfVectorizer(
                ngram_range=NGRAMS,
                sublinear_tf=True,
                dtype=np.float32,
                vocabulary={term: i for i, term in enumerate(self.vocabulary_)},
            )
            self.vectorizer_.idf_ = self.idf_
        return self.vectorizer_.transform([str(t) for t in texts])

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's class probabilities, from every word of it (scikit-learn's analyser)."""
        from scipy.special import softmax

        logits = self._features(texts) @ self.weights_["w"] + self.weights_["b"]
        return softmax(np.asarray(logits, dtype=np.float64), axis=1)

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(
            buffer,
            kind=np.array(KIND),
            vocabulary=self.vocabulary_,
            idf=self.idf_,
            w=self.weights_["w"],
            b=self.weights_["b"],
            classes=np.array(self.classes_, dtype=str),
            params_json=np.array(json.dumps(asdict(self.params))),
        )
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> TfidfStudent:
        with np.load(io.BytesIO(blob), allow_pickle=False) as stored:
            model = cls(TfidfStudentParams(**json.loads(str(stored["params_json"]))))
            model.vocabulary_ = stored["vocabulary"]
            model.idf_ = stored["idf"]
            model.weights_ = {"w": stored["w"], "b": stored["b"]}
            model.classes_ = [str(c) for c in stored["classes"]]
        model.n_parameters_ = int(model.weights_["w"].size + model.weights_["b"].size)
        return model

    def to_onnx(self) -> None:
        return None


class _Loss:
    """``(1 - w) T² KL(teacher_T || student_T) + w CE(gold)`` averaged over the rows, plus
    ``l2 |W|²``, and its gradient, for L-BFGS over the flattened (weights, bias)."""

    def __init__(self, X, teacher_logits, gold, n_classes, distill: DistillParams, l2) -> None:
        from scipy.special import softmax

        self.X, self.n_classes, self.l2 = X, n_classes, l2
        # None: the kind's, which is the teacher's KL alone
        self.T, self.w = distill.temperature, distill.gold_weight or 0.0
        self.size = X.shape[1] * n_classes + n_classes
        self.has_teacher = ~np.isnan(teacher_logits).any(axis=1)
        self.soft = softmax(np.nan_to_num(teacher_logits).astype(np.float64) / self.T, axis=1)
        self.gold = np.zeros((len(gold), n_classes))
        labelled = np.asarray(gold) >= 0
        self.gold[np.flatnonzero(labelled), np.asarray(gold)[labelled]] = 1.0
        self.labelled = labelled
        self.curve: list[float] = []

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = self.X.shape[1] * self.n_classes
        return theta[:d].reshape(-1, self.n_classes), theta[d:]

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        from scipy.special import log_softmax

        weights, bias = self.unpack(theta)
        logits = np.asarray(self.X @ weights) + bias
        rows = len(logits)
        d_logits = np.zeros_like(logits)
        loss = self.l2 * float(np.sum(weights * weights))
        if self.w < 1 and self.has_teacher.any():
            t = self.has_teacher
            log_student = log_softmax(logits[t] / self.T, axis=1)
            soft = self.soft[t]
            kl = np.sum(soft * (np.log(np.clip(soft, 1e-12, None)) - log_student))
            loss += (1 - self.w) * self.T**2 * kl / rows
            d_logits[t] += (1 - self.w) * self.T * (np.exp(log_student) - soft) / rows
        if self.w > 0 and self.labelled.any():
            g = self.labelled
            log_p = log_softmax(logits[g], axis=1)
            loss += -self.w * float(np.sum(self.gold[g] * log_p)) / rows
            d_logits[g] += self.w * (np.exp(log_p) - self.gold[g]) / rows
        grad_w = np.asarray(self.X.T @ d_logits) + 2 * self.l2 * weights
        self.curve.append(float(loss))
        return float(loss), np.concatenate([grad_w.ravel(), d_logits.sum(axis=0)])
