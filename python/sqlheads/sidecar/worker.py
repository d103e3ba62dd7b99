"""The sidecar: claim a job, run its work with a heartbeat, record how it ended.

``sqlheads sidecar`` runs :meth:`Sidecar.run`. While a job runs, a thread beats for its claim
every ``jobs.heartbeat_seconds``; the work function reports through a
:class:`~sqlheads.sidecar.progress.RecordedProgress` (contract 2), which records progress in
the job row (throttled), draws a progress bar, and raises
:class:`~sqlheads.errors.JobCancelledError` once the job's cancel was requested (or its claim
was lost), so the work stops where it stands. A job that raises is failed (and queued again
while it has attempts left); a killed sidecar's job goes stale and is taken over.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from sqlheads import settings
from sqlheads.engine.constraints import FLAG, Instance, Interval, Names, Params, Text, param
from sqlheads.engine.encoders.onnx_encoder import cache_dir
from sqlheads.errors import (
    JobCancelledError,
    JobClaimLostError,
    SqlheadsError,
    UnknownJobKindError,
)
from sqlheads.sidecar.progress import JobBar, JobLines, RecordedProgress
from sqlheads.store.claims import JobClaim
from sqlheads.store.jobs import FINISHED, Job, JobQueue, worker_name
from sqlheads.store.repository import Store

log = logging.getLogger("sqlheads.sidecar")


def _teacher(store: Store, job: Job, **context: Any) -> dict[str, Any]:
    # Imported when a teacher job runs: it needs transformers. A request made in T-SQL stores
    # only the parameters the analyst gave: run_teacher completes them with its defaults
    # (TeacherRequest.from_flat), as a request made in Python did before enqueueing.
    from sqlheads.sidecar.teacher import run_teacher

    return run_teacher(
        store, job_id=job.job_id, head=job.head, set_name=job.set_name, **context, **job.parameters
    )


def _embed(store: Store, job: Job, *, work_dir: Path, **context: Any) -> dict[str, Any]:
    # work_dir stays unused: a part resumes from the rows it wrote, not from a checkpoint.
    from sqlheads.sidecar.embed import run_embed

    return run_embed(
        store,
        job_id=job.job_id,
        set_name=job.set_name,
        key_from=job.key_from,
        key_to=job.key_to,
        **context,
        **job.parameters,
    )


WORK: dict[str, Callable[..., dict[str, Any]]] = {"teacher": _teacher, "embed": _embed}
JOB_KINDS = tuple(WORK)


def _seconds(what: str) -> float:
    return float(settings.default(f"jobs.{what}_seconds"))


def database_key(store: Store) -> str:
    """A folder name for ``store``'s jobs under the cache: job ids start at 1 in every database,
    and sidecars of two databases on one host share the cache. Its URL without the password,
    a SQLite file's path made absolute."""
    url = store.engine.url
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        url = url.set(database=str(Path(url.database).resolve()))
    return hashlib.sha256(url.render_as_string(hide_password=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SidecarOptions(Params):
    """How a sidecar runs; every number's default and bounds are :data:`settings.SETTINGS`'."""

    device: str = param("auto", Text("auto, cpu, cuda or cuda:N"))
    once: bool = param(False, FLAG)  # run until nothing is claimable, then stop
    max_jobs: int | None = param(None, Interval(int, 1), None)  # stop after this many jobs
    poll_seconds: float = param(_seconds("poll"), settings.bounds("jobs.poll_seconds", float))
    heartbeat_seconds: float = param(
        _seconds("heartbeat"), settings.bounds("jobs.heartbeat_seconds", float)
    )
    stale_after_seconds: int = param(
        settings.default("jobs.stale_after_seconds"), settings.bounds("jobs.stale_after_seconds")
    )
    # only these job kinds; () all
    kinds: tuple[str, ...] = param((), Names(JOB_KINDS), error=UnknownJobKindError)
    # per-job work directories; default: the cache dir's jobs/
    work_root: Path | None = param(None, Instance((Path,), "a folder"), None)
    worker: str = param(factory=worker_name)


class _Heartbeat(threading.Thread):
    """Beats for a claim until stopped; sets ``cancel`` when the job's cancel is requested."""

    def __init__(
        self, queue: JobQueue, job: Job, worker: str, seconds: float, progress: RecordedProgress
    ) -> None:
        super().__init__(name=f"heartbeat-{job.job_id}", daemon=True)
        self.queue, self.job, self.worker, self.seconds = queue, job, worker, seconds
        self.progress = progress
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.seconds):
            try:
                if self.queue.heartbeat(self.job.job_id, self.worker):
                    self.progress.stop.set()
            except JobClaimLostError:
                self.progress.reason = "another sidecar took its claim over"
                self.progress.stop.set()
                return
            except Exception:  # a database hiccup: beat again next time, the job goes on
                log.exception("heartbeat of job %s failed", self.job.job_id)


class SidecarStopped(BaseException):
    """SIGTERM (``docker stop``) or Ctrl-C while a job runs: a BaseException, as
    KeyboardInterrupt, so that no ``except Exception`` of a work function swallows it."""


class _StopSignals:
    """SIGTERM and SIGINT while the sidecar runs: noted always, raised as
    :class:`SidecarStopped` only inside a job's work (``interruptible``), so that a stop
    between a claim and its work cannot strand a claimed job; elsewhere the loop sees it."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self.interruptible = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.requested = f"signal {signum}"
        if self.interruptible:
            raise SidecarStopped(self.requested)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only
            return
        previous = {s: signal.signal(s, self) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    @contextlib.contextmanager
    def work(self) -> Iterator[None]:
        """Around a job's work function: a stop raises there (the job is given back)."""
        self.interruptible = True
        try:
            if self.requested:
                raise SidecarStopped(self.requested)
            yield
        finally:
            self.interruptible = False


class Sidecar:
    """Claims and runs jobs from one store's queue."""

    def __init__(
        self, store: Store, options: SidecarOptions | None = None, console: Console | None = None
    ) -> None:
        from sqlheads.engine.devices import resolve_device

        self.store = store
        self.options = options or SidecarOptions()
        # A GPU asked for but absent is refused before anything is claimed (50055).
        self.device = resolve_device(self.options.device)
        self.queue = JobQueue(store, stale_after_seconds=self.options.stale_after_seconds)
        self.heartbeat_seconds = float(self.options.heartbeat_seconds)
        self.poll_seconds = float(self.options.poll_seconds)
        self.console = console or Console(stderr=True)
        self.work_root = self.options.work_root or cache_dir() / "jobs" / database_key(store)
        self.signals = _StopSignals()

    def run(self) -> dict[str, Any]:
        """Claim and run jobs until ``max_jobs`` ran, or (``once``) nothing is claimable;
        a summary of what ran."""
        ran: list[dict[str, Any]] = []
        summary: dict[str, Any] = {"worker": self.options.worker, "device": str(self.device)}
        with self.signals.installed():
            while self.options.max_jobs is None or len(ran) < self.options.max_jobs:
                if self.signals.requested:
                    break
                job = self.queue.claim(self.options.worker, self.options.kinds or None)
                if job is None:
                    if self.options.once:
                        break
                    self._idle()
                    continue
                try:
                    ran.append(self.run_job(job))
                except SidecarStopped:
                    ran.append(
                        {"job_id": job.job_id, "kind": job.kind, "part": job.part}
                        | {"state": "released"}
                    )
        if self.signals.requested:
            summary["stopped"] = self.signals.requested
        return summary | {"jobs": ran}

    def work_dir(self, job_id: int) -> Path:
        """A job's folder: the same on every attempt, so that the checkpoints of a killed
        attempt are found by the next one."""
        return self.work_root / f"job-{job_id}"

    def _idle(self) -> None:
        """Wait ``poll_seconds`` before the next claim; a stop ends the wait early."""
        until = time.monotonic() + self.poll_seconds
        while not self.signals.requested and time.monotonic() < until:
            time.sleep(min(0.5, max(until - time.monotonic(), 0)))

    def run_job(self, job: Job) -> dict[str, Any]:
        """Run one claimed job to its end: done, failed (or queued again), or cancelled."""
        label = f"job {job.job_id} {job.kind} {job.set_name}" + (
            f" part {job.part}/{job.parts}" if job.parts > 1 else ""
        )
        bar = (
            JobBar(self.console, label)
            if self.console.is_terminal
            else JobLines(self.console, label)
        )
        stop = threading.Event()
        progress = RecordedProgress(self.queue, job, self.options.worker, stop, bar)
        beat = _Heartbeat(self.queue, job, self.options.worker, self.heartbeat_seconds, progress)
        work_dir = self.work_dir(job.job_id)
        work_dir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        outcome: dict[str, Any] = {"job_id": job.job_id, "kind": job.kind, "part": job.part}
        # Every write for the job names it: on SQL Server the sidecar's login writes sets,
        # versions and soft labels only through procedures scoped to the job it holds.
        store = self.store.for_job(JobClaim(job.job_id, self.options.worker, job.requested_user))
        beat.start()
        try:
            with self.signals.work():
                result = WORK[job.kind](
                    store, job, device=self.device, work_dir=work_dir, progress=progress
                )
        except JobCancelledError as error:
            outcome |= self._stopped(job, progress, error)
        except SidecarStopped:
            # Told to stop (docker stop, Ctrl-C): the job goes back to the queue now, for
            # another sidecar, instead of after the stale limit; then this sidecar exits.
            with contextlib.suppress(JobClaimLostError):
                self.queue.release(job.job_id, self.options.worker)
            raise
        except Exception as error:  # every failure is recorded in the job row
            log.warning("job %s failed: %s", job.job_id, error)
            try:
                outcome["state"] = self.queue.fail(job.job_id, self.options.worker, error)
            except JobClaimLostError:
                outcome["state"] = "lost"
            outcome["error"] = str(error)
            outcome["error_number"] = getattr(error, "number", None)
        else:
            try:
                self.queue.finish(job.job_id, self.options.worker, result, progress.last)
                outcome["state"] = "done"
            except JobClaimLostError:
                outcome["state"] = "lost"
        finally:
            beat.done.set()
            beat.join()
            bar.close()
        if outcome["state"] in FINISHED:
            # Nothing will resume from it: a teacher's checkpoints are three times its weights.
            shutil.rmtree(work_dir, ignore_errors=True)
        outcome["seconds"] = round(time.perf_counter() - started, 3)
        self.console.print(f"{label}: {outcome['state']} ({outcome['seconds']} s)", highlight=False)
        return outcome

    def _stopped(
        self, job: Job, progress: RecordedProgress, error: SqlheadsError
    ) -> dict[str, Any]:
        if progress.reason.startswith("another sidecar"):
            return {"state": "lost"}
        try:
            self.queue.mark_cancelled(job.job_id, self.options.worker)
        except JobClaimLostError:
            return {"state": "lost"}
        return {"state": "cancelled", "error": error.message}
