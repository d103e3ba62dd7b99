"""``python -m sqlheads.healthcheck [--device cuda]``: is this sidecar able to work?

The docker sidecar's healthcheck (docker/compose.yaml). It checks what a sidecar needs before it
can claim a job, and nothing else: the database at ``$SQLHEADS_URL`` (or ``--url``) answers,
is initialised, and its login can read the job queue; and the device resolves
(:func:`sqlheads.engine.devices.resolve_device`: ``cuda`` asked for and absent is 50055, never a
silent CPU). Prints one JSON line; exits 0 when healthy, 1 otherwise, with the numbered error.
Kept out of ``sqlheads.cli`` so that the CLI's start-up stays light for everyone else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from sqlheads.errors import SqlheadsError


def check(url: str, device: str) -> dict[str, Any]:
    """The sidecar's readiness as a dict; raises the numbered error of the first failure."""
    from sqlheads.engine.devices import resolve_device, supports_bf16
    from sqlheads.store import migrations
    from sqlheads.store.jobs import JobQueue
    from sqlheads.store.repository import Store

    store = Store.from_url(url)
    try:
        # No schema, or one another sqlheads version left: the compose stack's migrate
        # service runs `sqlheads init` before any sidecar starts.
        migrations.ensure_current(store, upgrade_sqlite=False)
        queued = JobQueue(store).count()
    finally:
        store.engine.dispose()
    resolved = resolve_device(device)
    report: dict[str, Any] = {
        "healthy": True,
        "database": store.engine.url.render_as_string(hide_password=True),
        "jobs": int(queued),
        "device": str(resolved),
        "bf16": supports_bf16(resolved),
    }
    if resolved.type == "cuda":
        import torch

        report["gpu"] = torch.cuda.get_device_name(resolved)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sqlheads.healthcheck", description=__doc__)
    parser.add_argument("--url", default=None, help="default: $SQLHEADS_URL")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    args = parser.parse_args(argv)
    url = args.url or os.environ.get("SQLHEADS_URL")
    if not url:
        print(json.dumps({"healthy": False, "error": "no database: set SQLHEADS_URL"}))
        return 1
    try:
        report = check(url, args.device)
    except SqlheadsError as error:
        print(json.dumps({"healthy": False, "error": str(error), "number": error.number}))
        return 1
    except Exception as error:  # a database that does not answer: the driver's own error
        print(json.dumps({"healthy": False, "error": f"{type(error).__name__}: {error}"}))
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
