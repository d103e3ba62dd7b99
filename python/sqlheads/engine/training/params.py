"""The fine-tuning knobs, free of PyTorch: a command line, a request or a help text reads
them without loading it (the loop that uses them is :mod:`sqlheads.engine.training.tuner`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlheads.errors import check_ranges

COMPILE_CHOICES = ("auto", "on", "off")
PRECISIONS = ("auto", "bf16", "fp32")


@dataclass
class TunerParams:
    """Fine-tuning knobs, validated before any work (scikit-learn style)."""

    epochs: int = 3
    batch_size: int = 32  # rows per batch (the most, with batch_tokens)
    lr: float = 3e-5
    max_length: int = 128
    batch_tokens: int | None = None  # cap on rows x padded width; None: batch_size rows a batch
    pad_multiple: int = 16  # padded widths rounded up to it: a few shapes, not one per length
    warmup_ratio: float = 0.1
    grad_accumulation: int = 1
    weight_decay: float = 0.01
    validation_fraction: float = 0.1  # slice of the training rows that decides early stopping
    patience: int = 2  # evaluations without improvement before stopping; 0: never stop early
    eval_steps: int | None = None  # optimiser steps between evaluations; None: once per epoch
    checkpoint_steps: int | None = None  # optimiser steps between checkpoints; None: by time
    checkpoint_seconds: float = 300.0  # wall-clock seconds between checkpoints (and at the end)
    compile: str = "auto"
    precision: str = "auto"
    seed: int = 0
    max_steps: int | None = None  # stop after this many optimiser steps (CI, smoke runs)

    def validate(self) -> TunerParams:
        checks = [
            (1 <= self.epochs <= 100, "epochs", "between 1 and 100"),
            (1 <= self.batch_size <= 4096, "batch_size", "between 1 and 4096"),
            (0 < self.lr <= 1e-2, "lr", "in (0, 0.01], e.g. 3e-5"),
            (16 <= self.max_length <= 8192, "max_length", "between 16 and 8192"),
            (
                self.batch_tokens is None or self.max_length <= self.batch_tokens <= 10**8,
                "batch_tokens",
                "at least max_length (one whole row) and at most 100000000, or None",
            ),
            (1 <= self.pad_multiple <= 512, "pad_multiple", "between 1 (no buckets) and 512"),
            (0 <= self.warmup_ratio < 1, "warmup_ratio", "in [0, 1), e.g. 0.1"),
            (1 <= self.grad_accumulation <= 1024, "grad_accumulation", "between 1 and 1024"),
            (0 <= self.weight_decay < 1, "weight_decay", "in [0, 1)"),
            (0 < self.validation_fraction < 0.5, "validation_fraction", "in (0, 0.5)"),
            (0 <= self.patience <= 100, "patience", "between 0 (no early stop) and 100"),
            (
                self.eval_steps is None or 1 <= self.eval_steps <= 1_000_000,
                "eval_steps",
                "between 1 and 1000000, or None (once per epoch)",
            ),
            (
                self.checkpoint_steps is None or 1 <= self.checkpoint_steps <= 1_000_000,
                "checkpoint_steps",
                "between 1 and 1000000, or None (by time alone)",
            ),
            (
                1 <= self.checkpoint_seconds <= 604_800,
                "checkpoint_seconds",
                "between 1 and 604800 (a week)",
            ),
            (self.compile in COMPILE_CHOICES, "compile", f"one of {COMPILE_CHOICES}"),
            (self.precision in PRECISIONS, "precision", f"one of {PRECISIONS}"),
            (0 <= self.seed < 2**32, "seed", "between 0 and 2**32 - 1"),
            (
                self.max_steps is None or 1 <= self.max_steps <= 10_000_000,
                "max_steps",
                "between 1 and 10000000, or None (all epochs)",
            ),
        ]
        check_ranges(self, checks)
        return self


@dataclass
class TeacherParams(TunerParams):
    """The teacher's fine-tuning knobs (the defaults of :class:`TunerParams`)."""
