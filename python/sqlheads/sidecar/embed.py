"""The sidecar's embed job: one part (a key range) of an embed request.

The rows are those the request captured for this part (:mod:`sqlheads.store.job_inputs`),
with the requester's permissions: the sidecar never runs the caller's source query, which
would run with the sidecar's rights; it only records it as the set's source query, with the
requester as its author. The request decided which part holds a row, and a part embeds exactly
its captured rows: it does not compare keys against its range again, since the request may have
cut them in another order (``heads.request_embed`` compares in BIN2, UTF-16 code units with
trailing spaces ignored; Python compares code points: supplementary characters and trailing
spaces sort differently). Hashing, rejects and writes are
:func:`sqlheads.verbs.embed.embed_rows`, the code ``sqlheads embed`` runs, so a set embedded in
N parts holds exactly the vectors a plain embed gives.

Parts of one set run at once on different sidecars, so a part does not hold the set's lock for
its whole run (``sqlheads embed`` does, and would shut the other parts out), only while it
writes a batch. Parts write disjoint keys, each batch in its own transaction; a part whose set
does not exist yet creates it, and a part that loses that race uses the set the winner created.
A part keeps nothing in its work folder: one claimed again after a kill resumes from what it
wrote, since embedding skips the rows whose stored text hash is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlheads import settings
from sqlheads.compute.embed import EmbedParams
from sqlheads.engine.constraints import MISSING, Params, Text, param
from sqlheads.engine.progress import Progress
from sqlheads.store.repository import Store
from sqlheads.verbs.embed import embed_rows
from sqlheads.verbs.rows import RowSource


@dataclass(frozen=True, kw_only=True)
class EmbedRequest(Params):
    """An embed request, as ``request-embed`` (or ``heads.request_embed``) makes it and each of
    its jobs stores it: the caller's source query (the record of what was asked: the job embeds
    the rows captured with it), the embed's parameters, the jobs it is split into by key range,
    and who embeds (``engine``: auto is PyTorch on a GPU, the set's ONNX graph on a CPU)."""

    source: str = param(MISSING, Text("a SELECT returning item_key and text"))
    embed: EmbedParams = param(factory=EmbedParams)
    parts: int = param(settings.default("embed.parts"), settings.bounds("embed.parts"))
    engine: str = param(settings.default("embed.engine"), settings.option("embed.engine"))


def embed_model(store: Store, set_name: str, request: EmbedRequest, device: Any):
    """The PyTorch encoder of the set's model for engine ``torch`` (or ``auto`` on a GPU);
    None for ``onnx`` (the set's registered graph, as ``sqlheads embed`` uses)."""
    engine = request.engine
    if engine == "onnx" or (engine == "auto" and device.type != "cuda"):
        return None
    from sqlheads.engine.encoders.torch_encoder import TorchEncoder  # imports torch: only when used

    found = store.find_set(set_name)
    name = (
        store.encoder(found.encoder_id).name
        if found is not None
        else request.embed.encoder or settings.DEFAULT_ENCODER
    )
    row = store.encoder_source(name)
    return TorchEncoder.for_encoder(
        row.source, row.tokenizer_json, dim=row.dim, max_length=row.max_length, device=device
    )


def run_embed(
    store: Store,
    *,
    job_id: int,
    set_name: str,
    device: Any,
    progress: Progress,
    key_from: str | None = None,
    key_to: str | None = None,
    **parameters: Any,
) -> dict[str, Any]:
    """Embed the captured rows of ``[key_from, key_to)`` into the set, as the request's
    ``parameters`` (its stored JSON: :class:`EmbedRequest`'s fields) say; the embed summary."""
    request = EmbedRequest.from_flat(parameters, what="the embed job")
    model = embed_model(store, set_name, request, device)
    progress(0, None, f"embedding {set_name} [{key_from or '…'}, {key_to or '…'})")
    summary = embed_rows(
        store,
        set_name=set_name,
        # the rows captured, never the query
        rows=RowSource(store, request.source, job_id=job_id),
        params=request.embed,
        progress=progress,
        model=model,
    )
    return summary | {
        "key_from": key_from,
        "key_to": key_to,
        "engine": "onnx" if model is None else "torch",
    }
