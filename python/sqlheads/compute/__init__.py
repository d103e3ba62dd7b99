"""What SQL Server's external scripts run: one module per verb, DataFrame in, DataFrame out.

Each verb takes its input query's rows as a pandas DataFrame (``InputDataSet``) and scalar
parameters, and returns a DataFrame (``OutputDataSet``) whose columns are the ones its caller
writes into its tables. Nothing here touches a database: the caller reads the input and writes
the output, in its own transaction. SQL Server's procedures reach these functions through
:func:`sqlheads.procedures.sql_server_call`; the embedded host (:mod:`sqlheads.verbs`) calls the
very same ones against any SQLAlchemy database, in the module of the same name.

Vectors cross the boundary as little-endian float32 bytes (``VARBINARY``), models as bytes,
and everything structured as JSON text. Shared by several verbs: :mod:`.columns` (each verb's
columns and the checks of its input rows), :mod:`.versions` (the row a new version is written
from) and :mod:`.model_cache` (loaded models, bounded by bytes).
"""
