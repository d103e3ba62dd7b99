"""Loaded models, kept between calls by their sha256 and bounded by bytes.

``predict`` is called once per chunk of a set (the embedded host, a deploy's re-scoring), so a
model is loaded once and reused; a teacher's blob is about 438 MB, so the cache keeps at most
``predict.model_cache_bytes`` (:data:`sqlheads.settings.SETTINGS`) of blobs, dropping the least
recently used first. The model used last always stays, however large: its next chunk must not
load it again.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from sqlheads.engine import kinds
from sqlheads.errors import InvalidParameterError
from sqlheads.settings import default


class ModelCache:
    def __init__(self, max_bytes: int | None = None) -> None:
        """``max_bytes``: the setting's unless given (a test's small bound)."""
        self.max_bytes = default("predict.model_cache_bytes") if max_bytes is None else max_bytes
        self._models: OrderedDict[str, tuple[kinds.Scorer, int]] = OrderedDict()

    @property
    def held_bytes(self) -> int:
        return sum(size for _, size in self._models.values())

    def __contains__(self, model_sha256: str) -> bool:
        return model_sha256 in self._models

    def load(self, model_sha256: str, model_blob: bytes, kind: kinds.ModelKind) -> kinds.Scorer:
        """The model of ``model_blob``, loaded once; a blob whose hash is not ``model_sha256``
        (a corrupt stored model) is refused."""
        if model_sha256 in self._models:
            self._models.move_to_end(model_sha256)
            return self._models[model_sha256][0]
        actual = hashlib.sha256(model_blob).hexdigest()
        if actual != model_sha256:
            raise InvalidParameterError(
                f"model blob hashes to {actual[:12]}, not {model_sha256[:12]}: the stored "
                "model is corrupt; train a new version"
            )
        model = kind.load(model_blob)
        self._models[model_sha256] = (model, len(model_blob))
        while len(self._models) > 1 and self.held_bytes > self.max_bytes:
            self._models.popitem(last=False)
        return model
