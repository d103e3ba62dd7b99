"""The sidecar: work that runs beside the database, on a GPU where there is one.

``worker`` claims queued jobs and runs them with a heartbeat; ``requests`` holds the analysts'
verbs (request, list, cancel); ``embed`` and ``teacher`` are the two kinds of work; ``progress``
is how work reports back (contract 2).
"""
