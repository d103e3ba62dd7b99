"""The embedded host's verbs, one module per verb: each runs its reads and writes through the
store and its statistics through the engine (SQL Server's procedures are the other door)."""
