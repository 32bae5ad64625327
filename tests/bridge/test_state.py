"""The bridge's SQLite state: dedup, generations, owner (real SQLite in tmp_path)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from bridge.state import BridgeState


def test_claim_dedups_by_event_id_and_by_message_id(tmp_path: Path) -> None:
    state = BridgeState(tmp_path / "feishu.db")
    assert state.claim("ev1", "om1") is True
    assert state.claim("ev1", "om1") is False  # the same push again
    assert state.claim("ev2", "om1") is False  # same message, new event id (backfill)
    assert state.claim("ev1", "om2") is False  # same event id (re-push) whatever it carries
    assert state.claim("ev3", "om3") is True
    state.close()


def test_dedup_survives_a_restart(tmp_path: Path) -> None:
    first = BridgeState(tmp_path / "feishu.db")
    assert first.claim("ev1", "om1")
    first.close()
    second = BridgeState(tmp_path / "feishu.db")
    assert second.claim("ev9", "om1") is False
    second.close()


def test_rows_are_kept_48_hours_then_pruned(tmp_path: Path) -> None:
    state = BridgeState(tmp_path / "feishu.db")
    now = time.time()
    state.claim("old", "om_old", now=now - 49 * 3600)
    state.claim("recent", "om_recent", now=now - 25 * 3600)
    assert state.prune(now=now) == 2  # the event and message rows of "old"
    assert state.claim("old", "om_old") is True
    assert state.claim("recent", "om_recent") is False
    state.close()


def test_release_lets_the_event_be_delivered_again(tmp_path: Path) -> None:
    state = BridgeState(tmp_path / "feishu.db")
    state.claim("ev1", "om1")
    state.release("ev1", "om1")
    assert state.claim("ev1", "om1") is True
    state.close()


def test_generations_start_at_one_and_persist(tmp_path: Path) -> None:
    state = BridgeState(tmp_path / "feishu.db")
    assert state.generation("oc_1") == 1
    assert state.bump_generation("oc_1") == 2
    assert state.bump_generation("oc_1") == 3
    assert state.generation("oc_2") == 1
    state.close()
    again = BridgeState(tmp_path / "feishu.db")
    assert again.generation("oc_1") == 3
    again.close()


def test_owner_is_set_once(tmp_path: Path) -> None:
    state = BridgeState(tmp_path / "feishu.db")
    assert state.owner() is None
    assert state.set_owner("ou_first") is True
    assert state.set_owner("ou_second") is False
    assert state.owner() == "ou_first"
    state.close()


def test_wal_mode_and_recorded_migrations(tmp_path: Path) -> None:
    BridgeState(tmp_path / "feishu.db").close()
    conn = sqlite3.connect(tmp_path / "feishu.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT version FROM schema_migrations").fetchall() == [
        (1,),
        (2,),
        (3,),
        (4,),
        (5,),
        (6,),
        (7,),
        (8,),
    ]
    conn.close()


def test_claims_from_many_threads_admit_each_message_once(tmp_path: Path) -> None:
    state = BridgeState(tmp_path / "feishu.db")
    wins: list[bool] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        for i in range(50):
            won = state.claim(f"ev{n}-{i}", f"om{i}")
            with lock:
                wins.append(won)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(wins) == 50
    state.close()
