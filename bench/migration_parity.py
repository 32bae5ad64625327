"""Do the bilingual questions get the same top 5 after `memory migrate`? SQLite vs PostgreSQL.

    uv run python bench/migration_parity.py               # default encoder (keyword + hybrid)
    uv run python bench/migration_parity.py --encoder none   # keyword search only

The 80 notes of `tests/data/bilingual_memory.json` are saved into a SQLite home and embedded
there, then moved into a fresh database on an embedded PostgreSQL (the migration's own steps:
`PostgresMemoryStore.restore` and the vector copy), and each of the 128 questions is searched
on both. Prints, per mode: identical top-5 lists, the same five notes in any order, and how
often the question's note is in the top 5 on each side. docs/postgres.md has the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory.config import MemoryConfig  # noqa: E402
from memory.encoders.models import load_encoder, parse_encoder_setting  # noqa: E402
from memory.model import NoteDraft  # noqa: E402
from memory.postgres.store import PostgresMemoryStore  # noqa: E402
from memory.search.fusion import SearchMode  # noqa: E402
from memory.sqlite.store import MemoryStore  # noqa: E402
from migration import _copy_vectors, _read_only  # noqa: E402
from storage.postgres import PostgresDatabase  # noqa: E402
from tests.fakes.postgres import EmbeddedPostgres  # noqa: E402

BILINGUAL = ROOT / "tests" / "data" / "bilingual_memory.json"
HEADER = (
    "| mode | identical top 5 | same five notes | identical scores | largest score difference"
    " | target in top 5: SQLite | PostgreSQL |\n|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encoder", default="auto", help="as CLAUDE_MEMORY_ENCODER")
    args = parser.parse_args(argv)
    data = json.loads(BILINGUAL.read_text("utf-8"))
    spec = parse_encoder_setting(args.encoder)
    encoder = load_encoder(spec) if spec is not None else None
    modes: list[SearchMode] = ["keyword", "auto"] if encoder is not None else ["keyword"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = EmbeddedPostgres(root / "pg").start()
        try:
            config = MemoryConfig.for_home(root / "home", fsync=False)
            database = PostgresDatabase(server.create_database(), min_size=1, max_size=2)
            database.open()
            # one clock for both: recency is part of the score, and seconds tick between them
            now = datetime.now(UTC).replace(microsecond=0)
            with MemoryStore.open(config, encoder=encoder, clock=lambda: now) as home:
                ids = {n["id"]: home.save(NoteDraft(content=n["text"])).id for n in data["notes"]}
                if encoder is not None:
                    home.sync_vectors()
                with PostgresMemoryStore.open(
                    database, config, encoder=encoder, clock=lambda: now
                ) as moved:
                    moved.restore(list(home.iter_notes()))
                    with _read_only(config.index_path) as index:
                        for model in home.vectors.models():
                            _copy_vectors(index, moved, model, None)
                    print(HEADER)
                    for mode in modes:
                        _compare(data["queries"], ids, home, moved, mode)
            database.close()
        finally:
            server.stop()
    return 0


def _compare(
    queries: list[dict[str, str]],
    ids: dict[str, str],
    home: MemoryStore,
    moved: PostgresMemoryStore,
    mode: SearchMode,
) -> None:
    def top5(store: MemoryStore | PostgresMemoryStore, query: str) -> list[tuple[str, float]]:
        found = store.search_detailed(query, limit=5, record_access=False, mode=mode)
        return [(hit.id, hit.score) for hit in found.hits]

    identical = same = scores = found_home = found_moved = 0
    largest = 0.0
    for q in queries:
        scored_a, scored_b = top5(home, q["query"]), top5(moved, q["query"])
        a, b = [i for i, _ in scored_a], [i for i, _ in scored_b]
        identical += a == b
        same += set(a) == set(b)
        scores += scored_a == scored_b
        if a == b:
            pairs = zip(scored_a, scored_b, strict=True)
            largest = max([largest, *(abs(x - y) for (_, x), (_, y) in pairs)])
        found_home += ids[q["target"]] in a
        found_moved += ids[q["target"]] in b
    label = "keyword" if mode == "keyword" else "hybrid (as the app searches)"
    n = len(queries)
    print(
        f"| {label} | {identical}/{n} | {same}/{n} | {scores}/{n} | {largest:.1e}"
        f" | {found_home}/{n} | {found_moved}/{n} |"
    )


if __name__ == "__main__":
    sys.exit(main())
