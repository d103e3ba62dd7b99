"""Tiny MLP classification heads trained on stored sentence vectors.

``HeadClassifier`` follows scikit-learn: parameters named once in ``__init__`` and validated
there, ``fit`` / ``predict_proba`` / ``predict``. Training uses PyTorch: on large sets with large
batches and early stopping on a validation slice (``recipe="fast"``), on small ones with the
full recipe (the seed project's: Adam with amsgrad, lr 1e-3, weight decay 1e-5, linear decay to
zero over every epoch, every training row), chosen by size unless named (``recipe="auto"``);
scoring needs only NumPy, so a fitted head serialises to a small ``.npz`` blob and scores
anywhere.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sqlheads.engine.constraints import SEED, Interval, OneOf, Params, param
from sqlheads.engine.progress import Progress
from sqlheads.errors import DimensionMismatchError, InvalidParameterError, SingleClassError


def default_hidden(n_classes: int) -> int:
    """Hidden width: 64 for a few classes, growing with many (4 per class, at most 512).

    The seed's "half the number of classes" gives one unit for two classes; 64 measured best
    on Rotten Tomatoes, and fifty classes need room for fifty directions.
    """
    return int(min(512, max(64, 4 * n_classes)))


def default_batch_size(n_rows: int) -> int:
    """Rows per step: 64, or about a hundredth of the training rows when there are more.

    A tiny MLP's step costs about a millisecond of framework overhead whatever its size, so a
    fixed batch makes time grow with rows; about 100 steps an epoch keeps 80,000 rows at
    ~14 s instead of ~44 s, with the same accuracy (measured on 50-class synthetic vectors),
    while small sets like Rotten Tomatoes keep the batch that measured best (64).
    """
    return int(min(8192, max(64, -(-n_rows // 100))))


RECIPES = ("auto", "fast", "full")
# "auto": the fast recipe from this many rows on, the full one below. Measured (docs/benchmarks.md,
# train and accuracy): on 100k+ rows fast matches the full recipe and logistic regression in a
# fraction of the time; on small sets it loses 1-8 points (Rotten Tomatoes 77.4 vs 78.5 %,
# 10k rows x 50 classes 27.4 vs 35.4 %), where the full recipe takes seconds anyway.
FAST_FROM_ROWS = 20_000
# Batches of 512 at lr 1e-3 reached the validation loss of batches of 1,024 at 3e-3 in the same
# epochs and CPU time (80,000 rows, 2 classes).
FAST_BATCH_SIZE = 512
# The fast recipe steps at twice ``lr``: its batches are 8x the full recipe's 64, and Adam's step
# grows about as the square root of that. On 80,000 x 384 synthetic rows it stopped after 3
# epochs instead of 4 (2 classes, overlapping), 2 instead of 3 (separable), 5 instead of 8
# (10 classes), 8 instead of 13 (50 classes), held-out accuracy +0.05, 0, +0.05 and -0.15
# point; Rotten Tomatoes' MiniLM vectors, 5 epochs instead of 8, -0.06 point. 3x lr lost
# 0.2-0.4 point on 10 and 50 classes.
FAST_LR_SCALE = 2.0


# The fast recipe's least fall of the validation loss (nats) that counts as an improvement. On
# separable classes the loss falls by ever fewer millionths for as long as it is let (100k x 384,
# 2 classes: 17 epochs where 3 reach 100 %); on overlapping ones (2, 10, 50 classes) 0.002 ended
# fits an epoch or three sooner at the same held-out accuracy (bench train).
TOL = 2e-3


def fast_batch_size(n_rows: int) -> int:
    """The fast recipe's rows per step: 512, fewer on small sets so an epoch is 20 steps.

    With a batch of 512 a set of 180 rows would take one step an epoch and stop, early, long
    before it fits (87 % instead of 95 % on a 16-d toy set that the full recipe fits).
    """
    return int(min(FAST_BATCH_SIZE, max(16, n_rows // 20)))


@dataclass(frozen=True)
class HeadParams(Params):
    """Hyper-parameters of a head, with the documented defaults.

    ``recipe="auto"`` (the default) is ``"fast"`` from :data:`FAST_FROM_ROWS` training rows on
    and ``"full"`` below. ``recipe="fast"`` trains with Adam on batches of :func:`fast_batch_size`
    rows (512, fewer on small sets) at a constant learning rate (:data:`FAST_LR_SCALE` x ``lr``)
    and stops when the loss on a
    held-back ``validation_fraction`` of the training rows has not improved by at least ``tol``
    for ``patience`` epochs, keeping the best epoch's weights; ``epochs`` is then an upper
    bound.
    ``recipe="full"`` is the seed project's recipe: Adam with amsgrad, linear decay to zero over
    exactly ``epochs`` epochs, batches of :func:`default_batch_size`, every training row used
    for training.
    """

    recipe: str = param("auto", OneOf(RECIPES))
    # None: default_hidden(number of classes)
    hidden: int | None = param(None, Interval(int, 1, 8192), None)
    epochs: int = param(30, Interval(int, 1, 10_000))
    lr: float = param(1e-3, Interval(float, 0, 1, "right"))
    weight_decay: float = param(1e-5, Interval(float, 0, 1, "left"))
    # None: fast_batch_size or default_batch_size (full)
    batch_size: int | None = param(None, Interval(int, 1, 65_536), None)
    dropout: float = param(0.1, Interval(float, 0, 1, "left"))
    validation_fraction: float = param(0.1, Interval(float, 0, 0.5, "left"))  # fast recipe only
    patience: int = param(1, Interval(int, 1, 1000))  # fast recipe only
    # fast recipe only: a smaller fall of the validation loss is no improvement (0: any fall)
    tol: float = param(TOL, Interval(float, 0, 1, "left"))
    seed: int = param(0, SEED)


def head_network(n_features: int, hidden: int, n_classes: int, dropout: float):
    """Input -> Linear -> ReLU -> Dropout -> Linear: the network every head trains."""
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(n_features, hidden),
        torch.nn.ReLU(),
        torch.nn.Dropout(dropout),
        torch.nn.Linear(hidden, n_classes),
    )


def network_weights(network) -> dict[str, np.ndarray]:
    """A trained :func:`head_network`'s weights as the arrays a head scores with."""
    first, last = network[0], network[3]
    return {
        "w1": first.weight.detach().numpy().copy(),
        "b1": first.bias.detach().numpy().copy(),
        "w2": last.weight.detach().numpy().copy(),
        "b2": last.bias.detach().numpy().copy(),
    }


@dataclass
class HeadClassifier:
    """A tiny MLP on sentence vectors, in scikit-learn's manner: Input → Linear → ReLU →
    Dropout → Linear → classes.

    ``HeadClassifier(HeadParams(...)).fit(X, y)`` on a (rows, dimensions) array of vectors and
    one label per row; ``predict_proba`` and ``predict`` then need only NumPy, and
    ``to_bytes`` / ``from_bytes`` carry the fitted head as an ``.npz`` blob (no pickle).
    """

    params: HeadParams = field(default_factory=HeadParams)
    classes_: list[str] = field(default_factory=list, init=False)
    loss_curve_: list[float] = field(default_factory=list, init=False)
    validation_curve_: list[float] = field(default_factory=list, init=False)
    batch_size_: int = field(default=0, init=False)
    recipe_: str = field(default="", init=False)  # the recipe "auto" chose
    best_epoch_: int = field(default=0, init=False)
    weights_: dict[str, np.ndarray] = field(default_factory=dict, init=False)

    @property
    def n_features_in_(self) -> int:
        return int(self.weights_["w1"].shape[1])

    def fit(
        self, X: np.ndarray, y: Sequence[str], progress: Progress | None = None
    ) -> HeadClassifier:
        """Train; ``progress`` hears ``(0, epochs at most)`` as the loop starts, then
        ``(epochs done, epochs at most)`` after each epoch."""
        import torch

        # A tiny MLP's matrices are too small to share out: one thread measured 13x faster
        # than two when the other core was busy, and no slower when it was idle.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self._fit(X, y, progress)
        finally:
            torch.set_num_threads(threads)

    def _fit(self, X: np.ndarray, y: Sequence[str], progress: Progress | None) -> HeadClassifier:
        import torch

        X = np.asarray(X, dtype=np.float32)
        labels = np.asarray([str(v) for v in y])
        if X.ndim != 2 or len(X) != len(labels):
            raise InvalidParameterError(
                f"X must be (rows, dim) with one label per row; got {X.shape} and {len(labels)}"
            )
        classes = sorted(set(labels.tolist()))
        if len(classes) < 2:
            raise SingleClassError(
                f"the labels hold one class ({classes[0] if classes else 'none'}): "
                "a classifier needs at least two; add rows of another class"
            )
        targets = torch.from_numpy(np.searchsorted(classes, labels).astype(np.int64))
        features = torch.from_numpy(X)
        p = self.params
        fast = p.recipe == "fast" or (p.recipe == "auto" and len(X) >= FAST_FROM_ROWS)
        self.recipe_ = "fast" if fast else "full"
        hidden = p.hidden or default_hidden(len(classes))
        torch.manual_seed(p.seed)
        generator = torch.Generator().manual_seed(p.seed)
        model = head_network(X.shape[1], hidden, len(classes), p.dropout)
        # fused: one kernel for the whole update instead of a dozen small ops per tensor; with
        # the loss summed on the tensor, 7-13 % off a fit of 90k x 384 rows (A/B, same result).
        optimizer = torch.optim.Adam(
            model.parameters(),
            lr=p.lr * (FAST_LR_SCALE if fast else 1.0),
            weight_decay=p.weight_decay,
            amsgrad=not fast,
            fused=True,
        )
        held_back = int(len(X) * p.validation_fraction) if fast else 0
        order = torch.randperm(len(X), generator=generator)
        fit_rows, check_rows = order[held_back:], order[:held_back]
        batch_size = p.batch_size or (
            fast_batch_size(len(fit_rows)) if fast else default_batch_size(len(fit_rows))
        )
        self.batch_size_ = batch_size
        steps_per_epoch = -(-len(fit_rows) // batch_size)
        total_steps = p.epochs * steps_per_epoch
        # The full recipe decays linearly to zero; the fast one keeps its rate until a plateau.
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: max(0.0, 1.0 - step / total_steps)
        )
        loss_fn = torch.nn.CrossEntropyLoss()
        self.loss_curve_, self.validation_curve_ = [], []
        best_loss, best_state, self.best_epoch_ = float("inf"), None, p.epochs
        stale = 0
        if progress is not None:  # training starts now, its libraries imported: a Ctrl-C from
            progress(0, p.epochs, None)  # here on lands in this loop, not inside an import
        for epoch in range(p.epochs):
            model.train()
            shuffled = fit_rows[torch.randperm(len(fit_rows), generator=generator)]
            epoch_loss = torch.zeros(())  # summed on the tensor: .item() each step syncs
            for start in range(0, len(shuffled), batch_size):
                batch = shuffled[start : start + batch_size]
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(features[batch]), targets[batch])
                loss.backward()
                optimizer.step()
                if not fast:
                    schedule.step()
                epoch_loss += loss.detach() * len(batch)
            self.loss_curve_.append(epoch_loss.item() / len(fit_rows))
            if progress is not None:
                progress(epoch + 1, p.epochs, None)
            if not held_back:
                continue
            model.eval()
            with torch.no_grad():
                check = loss_fn(model(features[check_rows]), targets[check_rows]).item()
            self.validation_curve_.append(check)
            improved = check < best_loss - p.tol
            if check < best_loss:  # a fall under tol still gives the best weights so far
                best_loss, self.best_epoch_ = check, epoch + 1
                best_state = {k: v.clone() for k, v in model.state_dict().items()}
            if improved:
                stale = 0
                continue
            stale += 1
            if stale >= p.patience:
                break
        if best_state is not None:
            model.load_state_dict(best_state)
        self.weights_ = network_weights(model)
        self.classes_ = classes
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Each row's class probabilities, columns in the order of ``classes_`` (NumPy only);
        vectors of another width than the head's are refused (50008 names the encoder)."""
        if not self.weights_:
            raise InvalidParameterError("this head is not fitted: call fit first")
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise DimensionMismatchError(
                f"the head expects vectors of {self.n_features_in_} dimensions, got "
                f"{X.shape[1] if X.ndim == 2 else X.shape}: score with the encoder it was "
                "trained on"
            )
        w = self.weights_
        hidden = np.maximum(X @ w["w1"].T + w["b1"], 0.0)
        logits = hidden @ w["w2"].T + w["b2"]
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=1, keepdims=True)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Each row's most probable class."""
        return np.asarray(self.classes_)[self.predict_proba(X).argmax(axis=1)]

    # -- persistence ---------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """A portable ``.npz``: weights plus classes; no pickle, so loading runs no code."""
        buffer = io.BytesIO()
        np.savez(buffer, classes=np.asarray(self.classes_, dtype=np.str_), **self.weights_)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> HeadClassifier:
        with np.load(io.BytesIO(blob), allow_pickle=False) as data:
            head = cls(HeadParams(hidden=int(data["w1"].shape[0])))
            head.weights_ = {name: data[name] for name in ("w1", "b1", "w2", "b2")}
            head.classes_ = [str(c) for c in data["classes"]]
        return head

    def to_onnx(self) -> bytes:
        """The head as an ONNX graph (``vector`` → ``probabilities``) for other runtimes."""
        from onnx import TensorProto, helper, numpy_helper

        w = self.weights_
        graph = helper.make_graph(
            [
                helper.make_node("Gemm", ["vector", "w1", "b1"], ["h"], transB=1),
                helper.make_node("Relu", ["h"], ["r"]),
                helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"], transB=1),
                helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
            ],
            "sqlheads_head",
            [
                helper.make_tensor_value_info(
                    "vector", TensorProto.FLOAT, ["batch", w["w1"].shape[1]]
                )
            ],
            [
                helper.make_tensor_value_info(
                    "probabilities", TensorProto.FLOAT, ["batch", len(self.classes_)]
                )
            ],
            [numpy_helper.from_array(w[name], name) for name in ("w1", "b1", "w2", "b2")],
        )
        # IR version 8 (opset 17) loads in every onnxruntime still in use.
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        model.metadata_props.add(key="classes", value="\n".join(self.classes_))
        return model.SerializeToString()
