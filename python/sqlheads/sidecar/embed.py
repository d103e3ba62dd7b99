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

from typing import Any

from sqlheads import settings
from sqlheads.engine.progress import Progress
from sqlheads.store.repository import Store
from sqlheads.verbs.embed import embed_rows
from sqlheads.verbs.rows import RowSource


def embed_model(store: Store, encoder_name: str | None, set_name: str, engine: str, device: Any):
    """The PyTorch encoder of the set's model for engine ``torch`` (or ``auto`` on a GPU);
    None for ``onnx`` (the set's registered graph, as ``sqlheads embed`` uses)."""
    engine = settings.choice("embed.engine", engine)
    if engine == "onnx" or (engine == "auto" and device.type != "cuda"):
        return None
    from sqlheads.engine.encoders.torch_encoder import TorchEncoder  # imports torch: only when used

    found = store.find_set(set_name)
    name = (
        store.encoder(found.encoder_id).name
        if found is not None
        else encoder_name or settings.DEFAULT_ENCODER
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
    source: str,
    key_from: str | None = None,
    key_to: str | None = None,
    encoder: str | None = None,
    long_text: str | None = None,
    engine: str = "auto",
    batch_rows: int | None = None,
    batch_size: int | None = None,
) -> dict[str, Any]:
    """Embed the captured rows of ``[key_from, key_to)`` into the set; the embed summary."""
    model = embed_model(store, encoder, set_name, engine, device)
    progress(0, None, f"embedding {set_name} [{key_from or '…'}, {key_to or '…'})")
    summary = embed_rows(
        store,
        set_name=set_name,
        rows=RowSource(store, source, job_id=job_id),  # the rows captured, never the query
        encoder=encoder,
        long_text=long_text,
        batch_rows=batch_rows,
        batch_size=batch_size,
        progress=progress,
        model=model,
    )
    return summary | {
        "key_from": key_from,
        "key_to": key_to,
        "engine": "onnx" if model is None else "torch",
    }
