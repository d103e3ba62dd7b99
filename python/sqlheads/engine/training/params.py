"""The fine-tuning knobs, free of PyTorch: a command line, a request or a help text reads
them without loading it (the loop that uses them is :mod:`sqlheads.engine.training.tuner`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlheads.engine.constraints import SEED, Interval, OneOf, Params, Rule, param

COMPILE_CHOICES = ("auto", "on", "off")
PRECISIONS = ("auto", "bf16", "fp32")
STEPS = Interval(int, 1, 1_000_000)


@dataclass(frozen=True)
class TunerParams(Params):
    """Fine-tuning knobs, checked when built (scikit-learn style); ``about``: what each does,
    as ``request-teacher --help`` says it."""

    epochs: int = param(3, Interval(int, 1, 100), about="Passes over the labelled rows.")
    batch_size: int = param(  # rows per batch (the most, with batch_tokens)
        32,
        Interval(int, 1, 4096),
        about="Rows per optimiser step (times --grad-accumulation).",
    )
    lr: float = param(3e-5, Interval(float, 0, 1e-2, "right"), about="Peak learning rate.")
    max_length: int = param(
        128, Interval(int, 16, 8192), about="Tokens read per row; longer texts are cut."
    )
    # cap on rows x padded width; None: batch_size rows a batch
    batch_tokens: int | None = param(None, Interval(int, 16, 10**8), None)
    # padded widths rounded up to it: a few shapes, not one per length (1: no buckets)
    pad_multiple: int = param(16, Interval(int, 1, 512))
    warmup_ratio: float = param(
        0.1,
        Interval(float, 0, 1, "left"),
        about="Share of the steps spent warming the learning rate up.",
    )
    grad_accumulation: int = param(
        1, Interval(int, 1, 1024), about="Batches summed before each optimiser step."
    )
    weight_decay: float = param(0.01, Interval(float, 0, 1, "left"))
    # slice of the training rows that decides early stopping
    validation_fraction: float = param(0.1, Interval(float, 0, 0.5, "neither"))
    patience: int = param(  # evaluations without improvement before stopping; 0: never stop
        2,
        Interval(int, 0, 100),
        about="Evaluations without improvement before stopping; 0: never stop early.",
    )
    eval_steps: int | None = param(None, STEPS, None)  # steps between evaluations; None: epochs
    # optimiser steps between checkpoints; None: by time alone
    checkpoint_steps: int | None = param(None, STEPS, None)
    # wall-clock seconds between checkpoints (and at the end), a week at most
    checkpoint_seconds: float = param(300.0, Interval(float, 1, 604_800))
    compile: str = param("auto", OneOf(COMPILE_CHOICES))
    precision: str = param("auto", OneOf(PRECISIONS))
    seed: int = param(0, SEED, about="Random seed of the fine-tuning.")
    max_steps: int | None = param(  # stop after this many optimiser steps (CI, smoke runs)
        None,
        Interval(int, 1, 10_000_000),
        None,
        about="Stop after this many optimiser steps (smoke runs).",
    )

    RULES = (
        Rule(
            "batch_tokens",
            lambda p: p.batch_tokens is None or p.batch_tokens >= p.max_length,
            "is less than max_length={max_length}: pass at least one whole row, or None",
        ),
    )


@dataclass(frozen=True)
class TeacherParams(TunerParams):
    """The teacher's fine-tuning knobs (the defaults of :class:`TunerParams`)."""
