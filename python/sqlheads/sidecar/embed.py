"""The sidecar's embed job: one part (a key range) of an embed request.

The rows come through the caller's source query stored with the job, never through a query of
the sidecar's making; each part keeps the rows of its own key range (compared as Python
strings, as the request cut them: :func:`sqlheads.store.jobs.split_keys`). Hashing, rejects
and writes are :func:`sqlheads.host.embed_rows`, the code ``sqlheads embed`` runs, so a set
embedded in N parts holds exactly the vectors a plain embed gives.

Parts of one set run at once on different sidecars, so a part does not hold the set's lock
(``sqlheads embed`` holds it for a whole run and would shut the other parts out). Parts write
disjoint keys, each batch in its own transaction; a part whose set does not exist yet creates
it, and a part that loses that race uses the set the winner created.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlheads import host, procedures
from sqlheads.store.jobs import in_range
from sqlheads.store.repository import Store

if TYPE_CHECKING:
    from sqlheads.sidecar.progress import JobProgress  # contract 2


def embed_model(store: Store, encoder_name: str | None, set_name: str, engine: str, device: Any):
    """The PyTorch encoder of the set's model for engine ``torch`` (or ``auto`` on a GPU);
    None for ``onnx`` (the set's registered graph, as ``sqlheads embed`` uses)."""
    engine = procedures.choice("embed.engine", engine)
    if engine == "onnx" or (engine == "auto" and device.type != "cuda"):
        return None
    from sqlalchemy import select

    from sqlheads.engine.torch_encoder import TorchEncoder  # imports torch: only when used
    from sqlheads.store import schema as s

    found = store.find_set(set_name)
    name = (
        store.encoder(found.encoder_id).name
        if found is not None
        else encoder_name or procedures.DEFAULT_ENCODER
    )
    with store.engine.connect() as c:
        row = c.execute(
            select(
                s.encoders.c.source,
                s.encoders.c.tokenizer_json,
                s.encoders.c.dim,
                s.encoders.c.max_length,
            ).where(s.encoders.c.name == name)
        ).one()
    return TorchEncoder.for_encoder(
        row.source, row.tokenizer_json, dim=row.dim, max_length=row.max_length, device=device
    )


def run_embed(
    store: Store,
    *,
    set_name: str,
    device: Any,
    work_dir: Path,
    progress: JobProgress,
    source: str,
    key_from: str | None = None,
    key_to: str | None = None,
    encoder: str | None = None,
    long_text: str | None = None,
    engine: str = "auto",
    batch_rows: int | None = None,
    batch_size: int | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """Embed the source rows of ``[key_from, key_to)`` into the set; the embed summary.

    ``work_dir`` holds nothing: an interrupted part resumes from what it already wrote,
    since embedding skips rows whose stored text hash is unchanged.
    """
    del work_dir
    model = embed_model(store, encoder, set_name, engine, device)
    scanned = 0

    def on_rows(rows: int, total: int | None) -> None:
        nonlocal scanned
        scanned += rows
        progress(scanned, total, None)

    progress(0, None, f"embedding {set_name} [{key_from or '…'}, {key_to or '…'})")
    summary = host.embed_rows(
        store,
        set_name=set_name,
        source=source,
        encoder=encoder,
        long_text=long_text,
        batch_rows=batch_rows,
        batch_size=batch_size,
        threads=threads,
        progress=on_rows,
        stage=lambda label: progress(scanned, None, label),
        keys=lambda key: in_range(key, key_from, key_to),
        model=model,
    )
    return summary | {
        "key_from": key_from,
        "key_to": key_to,
        "engine": "onnx" if model is None else "torch",
    }
