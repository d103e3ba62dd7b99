"""``sqlheads report``: one version of a head as an HTML page with PNG plots.

The page shows the confusion matrix and per-class precision/recall of the held-out split (as
recorded at training time), the distribution of the scores that version wrote into
``predictions``, its training loss curve, and how it compares with the head's other versions
(the ``model_summary`` view). The numbers behind the first four plots are also written to
``model_figures`` (replacing that version's previous rows), so that a BI tool can draw them:

===================  =======================  ==================  ==================
figure               series                   x                   value
===================  =======================  ==================  ==================
confusion_matrix     true class               predicted class     rows
per_class            precision|recall|f1      class               metric
loss_curve           train_loss               epoch (1-based)     mean training loss
score_histogram      predicted label          bin's lower edge    predictions
baseline             model|tfidf_lr           accuracy|macro_f1   held-out metric
queue_margin         unlabelled               bin's lower edge    rows in the queue
drift                set                      signal              its value
drift_shares         set|training             class               share of rows
===================  =======================  ==================  ==================

The queue and drift sections (``label_queue`` and ``drift`` views, with the verbs' additions)
are the deployed version's: a report of another version says so instead.

The version comparison needs no rows of its own: BI tools read ``model_summary`` directly.
This package sits above the store and the engine: :mod:`.data` reads the store and makes the
figures' rows, :mod:`.figures` draws them (matplotlib, the ``report`` extra, with the Agg
backend: no display needed), :mod:`.page` writes the HTML around them.
"""

from sqlheads.report.page import build_report

__all__ = ["build_report"]
