"""The word student's architectures: one module each, named in :data:`NAMES`.

Each module defines ``ARCHITECTURE``, a :class:`~..network.WordArchitecture`: how it pools a
text's token embeddings, and the size it was measured best at under a million parameters on
Rotten Tomatoes with the frozen all-mpnet-base-v2 head as teacher (docs/benchmarks.md,
"students"); each size's ``max_vocabulary`` holds it under 1,000,000 parameters whatever its
texts' vocabulary (bag 980,866, cnn 992,622, bilstm 983,362, ngrams 994,306 at most, two
classes). A new architecture is a new module here and its name in :data:`NAMES`.
"""

from __future__ import annotations

from importlib import import_module

from sqlheads.engine.students.word.network import WordArchitecture

NAMES = ("bag", "cnn", "bilstm", "ngrams")  # the order help texts list them in
ARCHITECTURES: dict[str, WordArchitecture] = {
    name: import_module(f"{__name__}.{name}").ARCHITECTURE for name in NAMES
}
