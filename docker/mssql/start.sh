#!/bin/bash
# Container start: the Machine Learning Services settings, then sqlservr and launchpadd.
# mssql.conf is /var/opt/mssql/mssql.conf, inside the data volume: setting it at build time
# would reach a fresh volume only, never one that exists (issue 10, point 9). mssql-conf set is
# idempotent, so every start applies the image's settings.
set -euo pipefail
PY_TARGET=/usr/lib/python3.10/dist-packages
CACHE=/var/opt/mssql/sqlheads/cache
conf=/opt/mssql/bin/mssql-conf
"$conf" set EULA accepteulaml Y
"$conf" set extensibility pythonbinpath /usr/bin/python3.10
"$conf" set extensibility datadirectories "/usr/lib:${PY_TARGET}:/var/opt/mssql/sqlheads"
# The encoder cache: external scripts run as the satellite account, not as mssql. Give the
# satellite group write access (setgid, so new folders keep the group); where that group does
# not exist, a sticky world-writable folder. Either way sqlheads verifies every cached encoder
# by sha256 on load and, if it cannot write, keeps the encoder in memory.
mkdir -p "$CACHE"
if getent group mssql_satellite >/dev/null; then
    chown -R mssql:mssql_satellite /var/opt/mssql/sqlheads
    chmod -R 2775 /var/opt/mssql/sqlheads
else
    chown -R mssql /var/opt/mssql/sqlheads
    chmod 1777 "$CACHE"
fi
chown mssql /var/opt/mssql/mssql.conf
exec /usr/bin/supervisord -n -c /src/docker/mssql/supervisord.conf
