"""The int8 graph on a CPU without VNNI, emulated: ``python -m bench.emulated [--rows N]``.

The build machines all have AVX-512 VNNI, where onnxruntime's u8 x s8 kernels add four products
straight into int32; a CPU without it (AVX2) sums pairs in int16 first, and its fp32 operators
take other code paths. QEMU's user-mode emulator (Debian's ``qemu-user``) runs this Python
under ``-cpu Haswell`` (AVX2 and FMA, no AVX-512, no VNNI): onnxruntime reads the emulated
CPUID and runs its AVX2 kernels. That says what such a CPU computes, not how fast (emulation is
two orders of magnitude slower), so this prints accuracy and agreement only, never a speed.

The default all-MiniLM-L6-v2 int8 graph embeds the held-out rows of the fixed Rotten Tomatoes
split natively and emulated; a default head fitted on the native int8 vectors of the training
rows scores both. Printed: the cosine of each emulated vector to the native int8 and fp32 ones,
and the head's accuracy on each; and whether a text's vector depends on its batch there
(:func:`bench.batchings.batchings`: the same texts alone, shuffled in batches of 8, in
length-sorted batches of 32), as ``python -m bench encode`` measures natively.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CPU_MODEL = "Haswell"  # AVX2 + FMA; no AVX-512, no VNNI
REPOSITORY = Path(__file__).resolve().parents[1]
EMBED = """
import sys, numpy as np
sys.path.insert(0, sys.argv[5])
from bench.batchings import batchings
from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder
folder = sys.argv[1]
texts = [line.rstrip("\\n") for line in open(folder + "/texts.txt", encoding="utf-8")]
encoder = OnnxEncoder(folder + "/model.onnx", open(folder + "/tokenizer.json").read(),
                      dim=int(sys.argv[2]), max_length=int(sys.argv[3]), threads=2)
found = batchings(encoder, texts) if sys.argv[4] == "batchings" else {
    "vectors": encoder.encode(texts).vectors}
np.savez(folder + "/vectors.npz", **found)
"""


def embed_emulated(
    artifact, texts: list[str], cpu: str = CPU_MODEL, *, batched: bool = False
) -> np.ndarray | dict[str, np.ndarray]:
    """``texts`` (one line each) embedded by ``artifact`` (an ``EncoderArtifact``) in a Python
    process that QEMU runs as CPU model ``cpu`` (``batched``: :func:`bench.batchings.batchings`
    of them there);
    raises where ``qemu-x86_64`` is missing."""
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        raise FileNotFoundError("qemu-x86_64 is not installed: apt-get install qemu-user")
    with tempfile.TemporaryDirectory(prefix="sqlheads-emulated-") as folder:
        Path(folder, "model.onnx").write_bytes(artifact.onnx)
        Path(folder, "tokenizer.json").write_text(artifact.tokenizer_json)
        Path(folder, "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
        mode = "batchings" if batched else "vectors"
        program = [sys.executable, "-c", EMBED, folder, str(artifact.dim),
                   str(artifact.max_length), mode, str(REPOSITORY)]  # fmt: skip
        done = subprocess.run([qemu, "-cpu", cpu, *program], capture_output=True, text=True)
        if done.returncode != 0:  # QEMU warns of CPUID bits it cannot emulate: not an error
            raise RuntimeError(f"the emulated encoder failed:\n{done.stderr[-4000:]}")
        with np.load(Path(folder, "vectors.npz")) as saved:
            found = {name: saved[name] for name in saved.files}
        return found if batched else found["vectors"]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two matrices of vectors."""
    return np.sum(a * b, axis=1) / np.maximum(
        np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.emulated", description=__doc__)
    parser.add_argument("--rows", type=int, default=None, help="held-out rows (default: all)")
    args = parser.parse_args(argv)
    if shutil.which("qemu-x86_64") is None:
        print("qemu-x86_64 is not installed: apt-get install qemu-user", file=sys.stderr)
        return 2

    from sqlheads import datasets
    from sqlheads.engine.encoders.export import export_encoder
    from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder, int8_kernels
    from sqlheads.engine.heads import HeadClassifier

    rt = datasets.rotten_tomatoes()
    train, test = rt[rt["split"] == "train"], rt[rt["split"] == "test"]
    test = test.iloc[: args.rows] if args.rows else test
    # one text a line for the emulated process: a newline inside a review would split it
    texts = [" ".join(t.split()) for t in test["text"]]
    native = {}
    for path, quantization in (("int8", "int8"), ("fp32", "none")):
        artifact = export_encoder(quantization=quantization)
        encoder = OnnxEncoder(
            artifact.onnx, artifact.tokenizer_json, dim=artifact.dim,
            max_length=artifact.max_length, threads=2,
        )  # fmt: skip
        native[path] = encoder.encode(texts).vectors
        if path == "int8":
            int8, train_vectors = artifact, encoder.encode(train["text"].tolist()).vectors
    started = time.perf_counter()
    emulated = embed_emulated(int8, texts)
    emulated_seconds = time.perf_counter() - started

    def spread(values: np.ndarray) -> list[float]:
        return [round(float(values.mean()), 6), round(float(values.min()), 6)]

    head = HeadClassifier().fit(train_vectors, train["label"].to_numpy())
    y = test["label"].to_numpy()
    native_pred, emulated_pred = head.predict(native["int8"]), head.predict(emulated)
    to_native, to_fp32 = cosine(emulated, native["int8"]), cosine(emulated, native["fp32"])
    native_to_fp32 = cosine(native["int8"], native["fp32"])
    print(
        json.dumps(
            {
                "host_int8_kernels": int8_kernels(),
                "emulated_cpu": f"qemu-x86_64 -cpu {CPU_MODEL} (AVX2, FMA; no AVX-512, no VNNI)",
                "held_out_rows": len(test),
                "train_rows": len(train),
                "emulated_cosine_to_native_int8 (mean, min)": spread(to_native),
                "emulated_cosine_to_fp32 (mean, min)": spread(to_fp32),
                "native_cosine_to_fp32 (mean, min)": spread(native_to_fp32),
                "head_accuracy_native_int8": float(np.mean(native_pred == y)),
                "head_accuracy_emulated_int8": float(np.mean(emulated_pred == y)),
                "head_agreement": float(np.mean(native_pred == emulated_pred)),
                "emulated_seconds": round(emulated_seconds, 1),
                "load_average": os.getloadavg(),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
