"""The life set (`tests/data/life_memory.json`, read by `bench/retrieval_eval.py --sets life`)
has the shape the bench relies on: unique ids, every referenced note there, enough questions
per group with about a third held out, enough notes and unrelated prompts."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

LIFE = Path(__file__).resolve().parents[1] / "data" / "life_memory.json"
GROUPS = ("zh-zh", "en-en", "zh-en", "en-zh", "mixed", "two-note", "current", "past", "lookalike")
SPLITS = ("tune", "held_out")
LISTS = (
    "notes",
    "changes",
    "questions",
    "unrelated",
    "related_personal",
    "same_fact",
    "different_facts",
    "hand_cases",
)


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    if not LIFE.exists():
        pytest.skip(f"{LIFE.name} is not there yet (the life set is being written)")
    loaded: dict[str, Any] = json.loads(LIFE.read_text(encoding="utf-8"))
    return loaded


def test_every_part_is_there(data: dict[str, Any]) -> None:
    assert datetime.fromisoformat(data["now"])
    for name in LISTS:
        assert isinstance(data[name], list) and data[name], name


def test_ids_are_unique(data: dict[str, Any]) -> None:
    for name in LISTS:
        if name == "changes":
            continue
        ids = Counter(item["id"] for item in data[name])
        assert [i for i, n in ids.items() if n > 1] == [], name


def test_every_referenced_note_exists(data: dict[str, Any]) -> None:
    notes = {n["id"] for n in data["notes"]}
    for change in data["changes"]:
        assert {change["old"], change["new"]} <= notes, change
    for item in data["questions"] + data["related_personal"]:
        wanted = [*item["gold"], *item.get("stale", ()), *item.get("wrong", ())]
        assert item["gold"] and set(wanted) <= notes, item["id"]


def test_notes_are_in_date_order_and_well_formed(data: dict[str, Any]) -> None:
    notes = data["notes"]
    assert len(notes) >= 320
    dates = [datetime.fromisoformat(n["date"]) for n in notes]
    assert all(d.tzinfo is not None for d in dates)
    assert dates == sorted(dates)
    for note in notes:
        assert note["lang"] in ("zh", "en", "mix"), note["id"]
        assert note["scope"] == "user" or note["scope"].startswith("project:"), note["id"]
        assert note["text"].strip(), note["id"]


def test_each_group_has_enough_questions_about_a_third_held_out(data: dict[str, Any]) -> None:
    by_group: dict[str, list[str]] = {}
    for q in data["questions"]:
        assert q["group"] in GROUPS and q["split"] in SPLITS, q["id"]
        by_group.setdefault(q["group"], []).append(q["split"])
    for group in GROUPS:
        splits = by_group.get(group, [])
        assert len(splits) >= (12 if group == "past" else 35), group
        held_out = splits.count("held_out") / len(splits)
        assert 0.25 <= held_out <= 0.42, (group, held_out)


def test_group_fields_match_the_group(data: dict[str, Any]) -> None:
    for q in data["questions"]:
        if q["group"] == "two-note":
            assert len(q["gold"]) >= 2, q["id"]
        if q["group"] == "current":
            assert q.get("stale"), q["id"]
        if q["group"] == "lookalike":
            assert q.get("wrong"), q["id"]


def test_prompts_without_memory_and_the_checks(data: dict[str, Any]) -> None:
    assert len(data["unrelated"]) >= 150
    for item in data["unrelated"] + data["related_personal"]:
        assert item["prompt"].strip() and item["split"] in SPLITS, item["id"]
    for group in data["same_fact"]:
        assert len(group["texts"]) >= 2, group["id"]
    for pair in data["different_facts"]:
        assert pair["a"].strip() and pair["b"].strip() and pair["a"] != pair["b"], pair["id"]
    for case in data["hand_cases"]:
        assert case["wanted"] in ("new", "one") and len(case["texts"]) >= 2, case["id"]
