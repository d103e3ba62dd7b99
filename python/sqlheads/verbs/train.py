"""``train``: a new version of a head, fitted on a set's stored vectors for labelled keys."""

from __future__ import annotations

from typing import Any

from sqlheads.compute.train import TrainParams
from sqlheads.compute.train import train as train_rows
from sqlheads.engine.progress import Progress
from sqlheads.errors import EncoderMismatchError
from sqlheads.store.repository import Store, validate_name
from sqlheads.verbs import baselines
from sqlheads.verbs.locks import holding
from sqlheads.verbs.rows import RowSource
from sqlheads.verbs.versions import record_version


@holding(("set", True))  # the head's lock only while the version is written (add_version)
def train(
    store: Store,
    *,
    head: str,
    set_name: str,
    labels: str,
    params: TrainParams,
    source: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Train a new version of ``head`` as ``params`` says on the set's vectors for the keys
    ``labels`` returns.

    The set is held Shared for the whole run (no drop_set under it), the head's lock only while
    the version is written, as ``heads.train`` holds them: two trainings of one head run side
    by side and each gets its own version number; the deploy decision is made against the
    version deployed when it is written, waiting up to the parameters' ``lock_timeout_ms`` for
    the head. ``progress`` hears of each epoch: ``(epochs done, epochs at most)``. The TF-IDF
    baseline reads the rows' text through ``source``, else the set's stored source query
    (skipped without either). A set whose encoder is not ``params.encoder`` (when given) is
    refused, and so is one that is not the encoder of the head's earlier versions unless
    ``params.allow_encoder_change`` (50007): a version scores only sets of its encoder.
    """
    validate_name("head", head)  # before the training: the head's lock comes only at the write
    embedding_set = store.require_set(set_name)
    set_encoder = store.encoder(embedding_set.encoder_id)
    encoder = params.encoder
    if encoder is not None and encoder != set_encoder.name:
        raise EncoderMismatchError(
            f"set {set_name!r} holds vectors of encoder {set_encoder.name!r}, not {encoder!r}: "
            "train on a set embedded with that encoder, or drop --encoder"
        )
    if not params.allow_encoder_change:
        refuse_another_encoder(store, head, set_name, set_encoder.name)
    labelled = RowSource(store, labels).labels()
    vectors = store.vectors_for_keys(embedding_set.set_id, labelled["item_key"].tolist())
    labelled["vector"] = [vectors.get(k) for k in labelled["item_key"]]
    texts, no_text = baselines.read_texts(
        store, embedding_set, RowSource.optional(store, source), labelled["item_key"]
    )
    if texts is not None:
        labelled["text"] = texts
    deployed = store.deployed_model(head)
    result = train_rows(
        labelled,
        params=params,
        dim=set_encoder.dim,
        deployed_macro_f1=deployed.macro_f1 if deployed else None,
        no_text=no_text,
        progress=progress,
    ).iloc[0]
    return record_version(
        store,
        head,
        embedding_set,
        result,
        params.version,
        texts=texts,
        labelled=labelled["item_key"].tolist(),
    )


def refuse_another_encoder(store: Store, head: str, set_name: str, encoder: str) -> None:
    """Refuse (50007) a version of ``head`` on a set of ``encoder`` when the head's earlier
    versions were trained on another: deployed, it would score none of their sets (predict
    refuses a set of another encoder), and the versions' metrics would compare two encoders."""
    earlier = store.read_view("model_summary", head=head)["encoder_name"]
    others = sorted(set(earlier) - {encoder})
    if not others:
        return
    raise EncoderMismatchError(
        f"head {head!r} has versions on encoder {', '.join(map(repr, others))}, and set "
        f"{set_name!r} holds vectors of {encoder!r}: a version scores only sets of its own "
        f"encoder. Train a head of its own for {encoder!r} (--head {head}_{encoder}), or pass "
        f"--allow-encoder-change to make this version of {head!r} one on {encoder!r} (deployed, "
        "it scores only sets of that encoder)"
    )
