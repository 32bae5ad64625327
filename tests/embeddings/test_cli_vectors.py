"""`claude-memory memory reindex --vectors` embeds with a progress bar; search then uses the
vectors; stats lists them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import main as cli_main

pytest.importorskip("numpy")


def memory(*argv: str) -> int:
    """`claude-memory ... memory ...`: the settings (the encoder here) from the environment."""
    home = list(argv[:2])
    return cli_main([*home, "memory", *argv[2:]])


def test_reindex_vectors_then_search_is_hybrid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_ENCODER", "hashing")
    home = ["--home", str(tmp_path / "home")]
    assert memory(*home, "add", "修复连接池泄漏：数据库连接没有归还") == 0
    assert memory(*home, "add", "The user prefers dark mode in every editor.") == 0
    capsys.readouterr()

    assert memory(*home, "reindex", "--vectors") == 0
    out, err = capsys.readouterr()
    assert "embedded 3 notes with hashing-256" in out  # two notes and the profile
    assert "embed" in err and "3/3" in err  # the progress bar

    assert memory(*home, "search", "连接池") == 0
    out, err = capsys.readouterr()
    assert "修复连接池泄漏" in out and "note:" not in err

    assert memory(*home, "stats") == 0
    assert "vectors: 3 notes by hashing-256" in capsys.readouterr().out


def test_reindex_vectors_without_an_encoder_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_ENCODER", "none")
    assert memory("--home", str(tmp_path / "home"), "reindex", "--vectors") == 1
    assert "CLAUDE_MEMORY_ENCODER" in capsys.readouterr().err


def test_search_without_vectors_does_not_load_an_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_ENCODER", "openai:nothing")  # would fail if loaded
    home = ["--home", str(tmp_path / "home")]
    assert memory(*home, "add", "a keyword note") == 0
    assert memory(*home, "search", "keyword") == 0
    out, err = capsys.readouterr()
    assert "a keyword note" in out and err == ""
