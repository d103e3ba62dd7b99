"""The embedded host: each verb run against any SQLAlchemy database, one module per verb.

A verb reads its rows through the store (a caller's query, or the rows a sidecar job
captured: :mod:`.rows`), calls its half in :mod:`sqlheads.compute` (the module of the same
name) with them as a DataFrame, and writes the output back, in batches that commit on their
own so that a process killed half-way loses at most the batch in flight. Shared: :mod:`.rows`,
:mod:`.versions` (a new version stored, deployed if its policy says so), :mod:`.locks` (the
set's and head's locks, the names SQL Server's procedures lock) and :mod:`.progress`.
:mod:`sqlheads.host` is their public face.
"""
