"""The fine-tuning loop shared by the teacher and the encoder student (no SQL, no export).

A transformer sequence classifier learns from pre-tokenised rows through a loss the caller
supplies (cross-entropy on gold labels for a teacher, the tempered KL of
:mod:`engine.students.losses` for a student). The loop owns what makes fine-tuning cheap and
safe: length-bucketed batches (a fixed number of rows, or a token budget) padded to a few
widths, bf16 autocast where the device computes it natively, pinned non-blocking copies and no
host sync per step on CUDA, fused AdamW (on the CPU too), warm-up then linear decay, gradient
accumulation, early stopping on a held-out slice of the training rows, atomic checkpoints on a
wall-clock interval written off the training thread that a killed process resumes from,
``torch.compile`` where it pays, and DDP sharding when launched under ``torchrun``.

Measured on an H100 (the first GPU run, in docs/results/measured.json): the eager loop is
host-bound (52-56 ms a step at batch 16, 32 or 64), so the defaults take fewer, larger steps
(batch 32 at 3e-5: 89.7-90.0 % RT in both loops measured, where batch 64 at 6e-5 fell to
89.3 %), and checkpoints of 1.3 GB every 200 steps cost 12 s of 77 s. bf16 stays autocast over
fp32 master weights: bf16 weights without a master copy lost 2 points of accuracy there, and a
compiled graph fuses autocast's casts, which cost most in eager mode.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sqlheads.engine.devices import supports_bf16, to_device
from sqlheads.engine.encoders.onnx_encoder import bucket_width, pad_ids, pad_to_width
from sqlheads.engine.progress import Progress
from sqlheads.engine.training.batches import batch_order
from sqlheads.engine.training.params import TunerParams
from sqlheads.errors import CheckpointMismatchError, InvalidParameterError

CHECKPOINT = "checkpoint.pt"
BEST = "best.pt"


def should_compile(choice: str, device: torch.device, params: TunerParams) -> bool:
    """``on``/``off`` as told; ``auto`` only on CUDA with a few fixed shapes (bucketed widths,
    a fixed number of rows). Measured on an H100: with a shape per padded length, compiling
    took 224.5 s against 29.9 s eager; with buckets it compiles once per bucket (its GPU figure
    is still to be measured). Never by rule on the CPU, where it has not been shown to pay."""
    if choice in ("on", "off"):
        return choice == "on"
    return device.type == "cuda" and params.pad_multiple > 1 and params.batch_tokens is None


def compiled(model: torch.nn.Module, params: TunerParams) -> Callable:
    """``model`` compiled for static shapes: one graph per bucket width (a full batch and an
    epoch's last, shorter one), so dynamo's recompile limit is raised to that many."""
    import torch._dynamo.config as dynamo_config

    shapes = 2 * -(-params.max_length // params.pad_multiple) + 2
    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, shapes)
    return torch.compile(model, dynamic=False)


def use_bf16(precision: str, device: torch.device) -> bool:
    """bf16 autocast where the device supports it; asking for it elsewhere is refused."""
    if precision == "bf16" and not supports_bf16(device):
        raise InvalidParameterError(
            f"precision='bf16' was asked for but device {device} does not compute bf16 "
            "natively: pass precision='auto' (bf16 where supported) or 'fp32'"
        )
    return precision != "fp32" and supports_bf16(device)


def adamw(parameters, params: TunerParams) -> torch.optim.AdamW:
    """AdamW's fused kernel, on the CPU as on CUDA (PyTorch has had a CPU one since 2.4): one
    pass over every weight a step. The per-tensor loop, PyTorch's CPU default, took 1.0 s of
    each MiniLM step at batch 64 on 2 cores, the fused kernel 0.16 s (forward and backward
    about 5 s; load 6.5, measured interleaved)."""
    return torch.optim.AdamW(parameters, lr=params.lr, weight_decay=params.weight_decay, fused=True)


@dataclass(frozen=True)
class Distributed:
    """This process's place under ``torchrun`` (one process, rank 0, when not launched so)."""

    rank: int = 0
    world_size: int = 1

    @classmethod
    def from_environment(cls, device: torch.device) -> Distributed:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        import torch.distributed as dist

        if device.type == "cuda":
            torch.cuda.set_device(device)  # NCCL's collectives run on the current device
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        return cls(dist.get_rank(), dist.get_world_size())

    @property
    def writes(self) -> bool:
        return self.rank == 0

    def shard(self, batches: list[np.ndarray]) -> list[np.ndarray]:
        """Every rank the same number of batches (DistributedSampler's rule, per bucket):
        the tail that does not divide evenly is dropped for this epoch."""
        usable = len(batches) - len(batches) % self.world_size
        return batches[self.rank : usable : self.world_size]


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (logits, row indices) -> loss


@dataclass
class TuneResult:
    steps: int
    resumed_from: int  # the optimiser step a checkpoint resumed from; 0 for a fresh start
    stopped_early: bool
    best_validation_loss: float | None
    loss_curve: list[float]  # mean training loss per evaluation interval
    compiled: bool
    bf16: bool
    seconds: float


class Tuner:
    """Fine-tune ``model`` in place on token id lists; one call of :meth:`fit`."""

    def __init__(
        self,
        params: TunerParams,
        device: torch.device,
        *,
        pad_id: int,
        work_dir: Path | None = None,
        fingerprint: dict[str, Any] | None = None,
    ) -> None:
        self.params = params
        self.device = device
        self.pad_id = pad_id
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.fingerprint = _digest({"params": asdict(params), **(fingerprint or {})})

    def fit(
        self,
        model: torch.nn.Module,
        ids: Sequence[list[int]],
        loss: LossFn,
        *,
        progress: Progress | None = None,
    ) -> TuneResult:
        """Train on ``ids`` (one token list per row); ``loss(logits, rows)`` scores a batch of
        row indices. A slice of rows (:attr:`TunerParams.validation_fraction`) is held back
        for early stopping; the best weights seen on it are the ones left in ``model``."""
        started = time.perf_counter()
        p, device = self.params, self.device
        distributed = Distributed.from_environment(device)
        torch.manual_seed(p.seed)
        rows = np.random.default_rng(p.seed).permutation(len(ids))
        n_valid = max(1, int(round(len(ids) * p.validation_fraction))) if p.patience else 0
        valid, train = np.sort(rows[:n_valid]), rows[n_valid:]
        if len(train) == 0:
            raise InvalidParameterError(
                f"{len(ids)} row(s) leave none to train on after the validation slice: "
                "label more rows"
            )
        lengths = np.array([len(s) for s in ids])
        per_epoch = [
            math.ceil(len(distributed.shard(_batches(train, lengths, p, e))) / p.grad_accumulation)
            for e in range(p.epochs)
        ]  # a token budget makes as many batches as the epoch's lengths need
        total = sum(per_epoch)
        if p.max_steps is not None:
            total = min(total, p.max_steps)
        model.to(device)
        bf16 = use_bf16(p.precision, device)
        optimizer = adamw(model.parameters(), p)
        from transformers import get_linear_schedule_with_warmup

        schedule = get_linear_schedule_with_warmup(
            optimizer, int(round(total * p.warmup_ratio)), max(total, 1)
        )
        state = _State()
        resumed = self._resume(model, optimizer, schedule, state)
        use_compile = should_compile(p.compile, device, p)
        forward = compiled(model, p) if use_compile else model
        if distributed.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            forward = DistributedDataParallel(
                forward, device_ids=[device.index] if device.type == "cuda" else None
            )
        eval_every = p.eval_steps or max(per_epoch[0], 1)
        writer = _CheckpointWriter()
        last_checkpoint = time.monotonic()
        if progress is not None:
            progress(state.step, total, None)
        stop = state.step >= total or state.stopped_early
        while not stop and state.epoch < p.epochs:
            batches = distributed.shard(_batches(train, lengths, p, state.epoch))
            model.train()
            optimizer.zero_grad(set_to_none=True)
            for position in range(state.position, len(batches)):
                rows_t = torch.from_numpy(batches[position])
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    logits = forward(**self._inputs(ids, batches[position])).logits
                batch_loss = loss(logits.float(), rows_t) / p.grad_accumulation
                batch_loss.backward()
                # Summed on the device and read at evaluation: no host sync per step.
                state.interval_loss = state.interval_loss + batch_loss.detach()
                state.interval_batches += 1 / p.grad_accumulation
                last = position == len(batches) - 1
                if (position + 1) % p.grad_accumulation and not last:
                    continue
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                state.step += 1
                state.position = position + 1
                if state.step % eval_every == 0 or state.step >= total or last:
                    self._evaluate(model, ids, valid, loss, bf16, state)
                    model.train()
                due = (p.checkpoint_steps is not None and state.step % p.checkpoint_steps == 0) or (
                    time.monotonic() - last_checkpoint >= p.checkpoint_seconds
                )
                if due:
                    self._checkpoint(model, optimizer, schedule, state, distributed, writer)
                    last_checkpoint = time.monotonic()
                if progress is not None:
                    progress(state.step, total, None)
                if state.step >= total or state.stopped_early:
                    stop = True
                    break
            if not stop:
                state.epoch, state.position = state.epoch + 1, 0
        self._checkpoint(model, optimizer, schedule, state, distributed, writer)
        writer.wait()
        self._restore_best(model, state)
        model.eval()
        return TuneResult(
            steps=state.step,
            resumed_from=resumed,
            stopped_early=state.stopped_early,
            best_validation_loss=state.best,
            loss_curve=state.curve,
            compiled=use_compile,
            bf16=bf16,
            seconds=time.perf_counter() - started,
        )

    # -- batches ---------------------------------------------------------------------------------

    def _inputs(self, ids: Sequence[list[int]], rows: np.ndarray) -> dict[str, torch.Tensor]:
        p = self.params
        padded, mask = pad_ids([ids[i] for i in rows], self.pad_id)
        width = bucket_width(padded.shape[1], p.pad_multiple, p.max_length)
        padded, mask = pad_to_width(padded, mask, width, self.pad_id)
        return {
            "input_ids": to_device(torch.from_numpy(padded), self.device),
            "attention_mask": to_device(torch.from_numpy(mask), self.device),
        }

    # -- early stopping --------------------------------------------------------------------------

    @torch.no_grad()
    def _evaluate(self, model, ids, valid, loss, bf16, state: _State) -> None:
        state.curve.append(float(state.interval_loss) / max(state.interval_batches, 1e-9))
        state.interval_loss = state.interval_batches = 0.0
        if len(valid) == 0:
            return
        model.eval()
        total, order = 0.0, valid[np.argsort([len(ids[i]) for i in valid], kind="stable")]
        for start in range(0, len(order), self.params.batch_size):
            rows = order[start : start + self.params.batch_size]
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                logits = model(**self._inputs(ids, rows)).logits
            total = total + loss(logits.float(), torch.from_numpy(rows)) * len(rows)
        # Every rank evaluates the same rows with the same weights: the same decision, with no
        # collective needed.
        mean = float(total) / len(order)
        if state.best is None or mean < state.best - 1e-6:
            state.best, state.bad = mean, 0
            # Kept on the host; written beside the next checkpoint, not at every evaluation.
            state.best_weights = _to_host(model.state_dict())
            state.best_written = False
        else:
            state.bad += 1
            state.stopped_early = state.bad >= self.params.patience

    def _restore_best(self, model, state: _State) -> None:
        if state.best is None or state.best_weights is None:
            return  # never evaluated (no validation slice): the last weights are the model
        model.load_state_dict(state.best_weights)

    # -- checkpoints -----------------------------------------------------------------------------

    def _checkpoint(
        self, model, optimizer, schedule, state: _State, distributed, writer: _CheckpointWriter
    ) -> None:
        """Copies what resume needs to the host here, then writes it on the writer's thread
        (the best weights first, so a checkpoint never names a best file not yet written)."""
        if self.work_dir is None or not distributed.writes:
            return  # only rank 0 writes; the others hold the same weights
        files = []
        if state.best_weights is not None and not state.best_written:
            files.append(({"state_dict": state.best_weights}, self.work_dir / BEST))
            state.best_written = True
        payload = {
            "fingerprint": self.fingerprint,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "schedule": schedule.state_dict(),
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "state": state.saved(),
        }
        files.append((_to_host(payload), self.work_dir / CHECKPOINT))
        writer.write(files)

    def _resume(self, model, optimizer, schedule, state: _State) -> int:
        path = None if self.work_dir is None else self.work_dir / CHECKPOINT
        if path is None or not path.is_file():
            return 0
        saved = torch.load(path, map_location=self.device, weights_only=False)
        if saved["fingerprint"] != self.fingerprint:
            raise CheckpointMismatchError(
                f"the checkpoint in {self.work_dir} was written by another fine-tuning (other "
                "rows, model or parameters): delete that folder to start over, or resume "
                "with the same request"
            )
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        torch.set_rng_state(saved["rng_cpu"])
        if saved["rng_cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["rng_cuda"])
        state.load(saved["state"])
        if state.best is not None and (self.work_dir / BEST).is_file():
            best = torch.load(self.work_dir / BEST, map_location="cpu", weights_only=True)
            state.best_weights, state.best_written = best["state_dict"], True
        return state.step


class _CheckpointWriter:
    """Writes checkpoint files on a thread of its own, one set at a time; an error in it is
    raised on the training thread at the next write or at :meth:`wait`."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def write(self, files: list[tuple[dict[str, Any], Path]]) -> None:
        self.wait()  # the previous set whole before the next: files never interleave
        self._thread = threading.Thread(target=self._run, args=(files,), name="checkpoint")
        self._thread.start()

    def _run(self, files: list[tuple[dict[str, Any], Path]]) -> None:
        try:
            for payload, path in files:
                _atomic_save(payload, path)
        except BaseException as error:  # noqa: BLE001 - re-raised on the training thread
            self._error = error

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def _to_host(value: Any) -> Any:
    """A copy of ``value`` with every tensor copied to the host: a snapshot the training
    thread may go on changing (optimizer state and weights update in place)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _to_host(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host(v) for v in value)
    return value


@dataclass
class _State:
    """Where the loop is: what a checkpoint must hold to continue exactly."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of this epoch already consumed
    best: float | None = None
    bad: int = 0
    stopped_early: bool = False
    interval_loss: float | torch.Tensor = 0.0  # a device tensor while training
    interval_batches: float = 0.0
    curve: list[float] | None = None
    best_weights: dict | None = None  # on the host; its own file, BEST
    best_written: bool = True

    def __post_init__(self) -> None:
        self.curve = [] if self.curve is None else self.curve

    def saved(self) -> dict[str, Any]:
        kept = {f.name: getattr(self, f.name) for f in fields(self)}
        del kept["best_weights"], kept["best_written"]
        kept["interval_loss"] = float(kept["interval_loss"])
        kept["curve"] = list(kept["curve"])
        return kept

    def load(self, saved: dict[str, Any]) -> None:
        for key, value in saved.items():
            setattr(self, key, value)


def _batches(rows: np.ndarray, lengths: np.ndarray, p: TunerParams, epoch: int):
    """This epoch's length-bucketed batches, a function of the seed and the epoch alone, so a
    resumed run replays exactly the order the killed one was following."""
    generator = np.random.default_rng([p.seed, epoch])
    if p.batch_tokens is None:
        return [rows[b] for b in batch_order(len(rows), p.batch_size, generator, lengths[rows])]
    return [rows[b] for b in token_batches(lengths[rows], p, generator)]


def token_batches(
    lengths: np.ndarray, p: TunerParams, generator: np.random.Generator
) -> list[np.ndarray]:
    """Shuffled batches of rows of similar length, each at most ``batch_size`` rows and
    ``batch_tokens`` padded tokens (widths bucketed as they will be padded): short rows go in
    big batches, long ones in small batches, and every batch costs about the same."""
    order = generator.permutation(len(lengths))
    widths = np.array([bucket_width(int(n), p.pad_multiple, p.max_length) for n in lengths])
    batches = []
    window = p.batch_size * 50  # as batch_order: sorted in windows, so each epoch differs
    for chunk in np.array_split(order, max(1, -(-len(order) // window))):
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        start = 0
        while start < len(chunk):
            end = start + 1  # ascending: a batch's width is its last row's
            while (
                end < len(chunk)
                and end - start < p.batch_size
                and (end + 1 - start) * widths[chunk[end]] <= p.batch_tokens
            ):
                end += 1
            batches.append(chunk[start:end])
            start = end
    return [batches[i] for i in generator.permutation(len(batches))]


def _atomic_save(payload: dict[str, Any], path: Path) -> None:
    """Write beside, then rename: a process killed mid-write leaves the previous file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    torch.save(payload, partial)
    os.replace(partial, path)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def data_fingerprint(ids: Sequence[list[int]], targets: np.ndarray) -> str:
    """What a checkpoint must have been trained on to be resumed: the rows and their targets."""
    digest = hashlib.sha256()
    for sequence in ids:
        digest.update(np.asarray(sequence, dtype=np.int64).tobytes() + b"|")
    digest.update(np.ascontiguousarray(targets).tobytes())
    return digest.hexdigest()
