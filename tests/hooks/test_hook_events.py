"""What each hook event does, fed real-shaped Claude Code payloads (in-process, direct mode)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.clients.conventions import last_assistant_reply
from memory.clients.hooks import IDLE_CLOSE_SECONDS, HookRequest, HookService
from memory.clients.observations import observe_tool
from memory.clients.project import identify
from memory.loop.episodes import EpisodeStore
from memory.loop.recall import WINDOW_TURNS
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.hooks.conftest import Hook, context_of

USER_NOTE = "用户喜欢简洁的中文回答，代码注释用英文。"


def _episodes(state: StateDB, store: MemoryStore) -> EpisodeStore:
    return EpisodeStore(state, store)


def _save(store: MemoryStore, content: str, **fields: object) -> str:
    return store.save(NoteDraft(content=content, **fields)).id  # type: ignore[arg-type]


def test_session_start_creates_the_episode_with_a_dev_session_title(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("shop/app", remote="git@github.com:acme/app.git")
    hook("session-start", cwd=project, source="startup")
    (episode,) = _episodes(state, store).list()
    assert re.fullmatch(r"app 开发会话 \d\d-\d\d \d\d:\d\d", episode.title)
    assert episode.status == "active"
    assert episode.key == "claude-code:sess-1"
    assert episode.project == "github.com_acme_app"
    assert episode.scope == "project:github.com_acme_app"


def test_session_start_injects_user_notes_summaries_and_an_observation_table(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    project = make_project("app")
    _save(store, USER_NOTE, title="回答风格", type="preference", path="user/answer-style.md")
    hook("session-start", cwd=project, session_id="old", source="startup")
    for n in range(3):
        hook("user-prompt-submit", cwd=project, session_id="old", prompt=f"refactor module {n}")
    hook(
        "post-tool-use",
        cwd=project,
        session_id="old",
        tool_name="Edit",
        tool_input={"file_path": f"{project}/src/auth.ts", "old_string": "a", "new_string": "b"},
        tool_response={"filePath": f"{project}/src/auth.ts"},
    )
    hook("session-end", cwd=project, session_id="old", reason="prompt_input_exit")

    context = context_of(hook("session-start", cwd=project, session_id="new", source="startup"))
    assert USER_NOTE in context
    assert "Latest sessions in app:" in context
    assert "Done: refactor module 0" in context
    assert "| id | time | type | title |" in context
    row = re.search(r"\| (\d+) \| \d\d-\d\d \d\d:\d\d \| change \| Edited src/auth.ts \|", context)
    assert row, context
    assert "get_observations" in context


def test_session_start_closes_an_earlier_session_only_once_it_is_idle(
    make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    now = [1_700_000_000.0]
    service = HookService(state, lambda: store, clock=lambda: now[0])
    project = identify(str(make_project("app")))

    def hook(event: str, session: str, **payload: object) -> str:
        return service.handle(HookRequest(event, session, project, dict(payload)))

    hook("session-start", "crashed", source="startup")
    for n in range(3):
        hook("user-prompt-submit", "crashed", prompt=f"fix bug {n}")
    now[0] += IDLE_CLOSE_SECONDS - 60
    hook("session-start", "other", source="startup")
    assert {e.key: e.status for e in _episodes(state, store).list()} == {
        "claude-code:crashed": "active",  # maybe another window, still in use: left alone
        "claude-code:other": "active",
    }
    now[0] += 120
    hook("session-start", "next", source="startup")
    by_key = {e.key: e for e in _episodes(state, store).list()}
    assert by_key["claude-code:crashed"].status == "completed"
    assert by_key["claude-code:crashed"].summary.startswith("Done: fix bug 0")
    assert by_key["claude-code:other"].status == "active"  # started 2 minutes ago
    assert by_key["claude-code:next"].status == "active"
    summary_note = store.get(by_key["claude-code:crashed"].summary_note_id or "")
    assert summary_note.scope == by_key["claude-code:crashed"].scope


def test_two_sessions_in_one_project_keep_their_own_episode_and_window(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app")
    note_id = _save(store, "Deploys go through the staging cluster first.", title="deploy flow")
    prompt = "how did I say our deploys reach production through staging?"
    hook("session-start", cwd=project, session_id="a", source="startup")
    assert f"[{note_id}]" in context_of(
        hook("user-prompt-submit", cwd=project, session_id="a", prompt=prompt)
    )
    hook("session-start", cwd=project, session_id="b", source="startup")
    assert f"[{note_id}]" in context_of(
        hook("user-prompt-submit", cwd=project, session_id="b", prompt=prompt)
    )
    assert f"[{note_id}]" not in context_of(
        hook("user-prompt-submit", cwd=project, session_id="a", prompt=prompt)
    )
    assert f"[{note_id}]" not in context_of(
        hook("user-prompt-submit", cwd=project, session_id="b", prompt=prompt)
    )
    episodes = {e.key: e for e in _episodes(state, store).list()}
    assert {k: (e.status, e.turns) for k, e in episodes.items()} == {
        "claude-code:a": ("active", 2),
        "claude-code:b": ("active", 2),
    }
    hook("session-end", cwd=project, session_id="a", reason="other")
    assert _episodes(state, store).active("claude-code:b") is not None
    assert f"[{note_id}]" not in context_of(
        hook("user-prompt-submit", cwd=project, session_id="b", prompt=prompt)
    )


def test_session_start_leaves_other_projects_sessions_alone(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    hook("session-start", cwd=make_project("one"), session_id="s-one", source="startup")
    hook("session-start", cwd=make_project("two"), session_id="s-two", source="startup")
    assert {e.status for e in _episodes(state, store).list()} == {"active"}


def test_resume_injects_only_its_own_summary_and_the_user_notes(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    project = make_project("app")
    _save(store, USER_NOTE, title="回答风格", type="preference", path="user/answer-style.md")
    for session, topic in (("s-a", "alpha caching layer"), ("s-b", "beta release notes")):
        hook("session-start", cwd=project, session_id=session, source="startup")
        for _ in range(3):
            hook("user-prompt-submit", cwd=project, session_id=session, prompt=f"work on {topic}")
        hook(
            "post-tool-use",
            cwd=project,
            session_id=session,
            tool_name="Bash",
            tool_input={"command": f"make {topic.split()[0]}"},
            tool_response={"stdout": "ok"},
        )
        hook("session-end", cwd=project, session_id=session, reason="other")

    context = context_of(hook("session-start", cwd=project, session_id="s-a", source="resume"))
    assert USER_NOTE in context
    assert "alpha caching layer" in context
    assert "beta release notes" not in context
    assert "| id | time | type | title |" not in context


def test_user_prompt_records_the_cleaned_message_and_injects_relevant_memories(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app")
    note_id = _save(
        store,
        "The payments service retries webhooks with exponential backoff, max 8 attempts.",
        title="webhook retry policy",
        type="architecture",
        scope="user",
    )
    hook("session-start", cwd=project, source="startup")
    out = hook(
        "user-prompt-submit",
        cwd=project,
        prompt="why do our webhook retries stop? my api_key=sk-ant-abcdefghijklmnopqrstuvwx",
    )
    assert out is not None
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    context = context_of(out)
    assert f"[{note_id}]" in context and "webhook retry policy" in context
    episodes = _episodes(state, store)
    (episode,) = episodes.list()
    (message,) = [m for m in episodes.messages(episode.id) if m.role == "user"]
    assert "sk-ant-abcdefghij" not in message.content
    assert "[REDACTED" in message.content
    assert episode.turns == 1


def test_injected_memories_are_not_repeated_within_the_window(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    project = make_project("app")
    note_id = _save(store, "Deploys go through the staging cluster first.", title="deploy flow")
    prompt = "how did I say our deploys reach production through staging?"
    assert f"[{note_id}]" in context_of(hook("user-prompt-submit", cwd=project, prompt=prompt))
    for _ in range(WINDOW_TURNS):
        assert f"[{note_id}]" not in context_of(
            hook("user-prompt-submit", cwd=project, prompt=prompt)
        )
    # the window (5 turns) has passed: each hook call was a fresh store and a fresh state read
    assert f"[{note_id}]" in context_of(hook("user-prompt-submit", cwd=project, prompt=prompt))


def test_first_turn_carries_at_most_ten_memories_and_later_turns_five(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    project = make_project("app")
    topics = (
        "ingress controller",
        "liveness probe",
        "readiness gate",
        "node affinity",
        "pod disruption budget",
        "horizontal autoscaler",
        "config map reload",
        "secret rotation",
        "persistent volume claim",
        "daemon set rollout",
        "cron job backoff",
        "service mesh",
        "network policy",
        "resource quota",
        "image pull policy",
        "init container",
        "stateful set ordering",
        "taints and tolerations",
        "cluster autoscaler",
        "helm chart",
        "operator reconcile loop",
        "etcd compaction",
        "kubelet eviction",
        "crash loop backoff",
        "sidecar injection",
        "rolling update surge",
        "namespace isolation",
        "pod priority",
        "vertical autoscaler",
        "custom resource definition",
    )
    for n, topic in enumerate(topics):
        _save(
            store,
            f"Kubernetes pods restart: lesson {n} about the {topic}, learned the hard way.",
            title=f"kubernetes {topic}",
        )
    assert store.count() >= 25
    first = context_of(
        hook("user-prompt-submit", cwd=project, prompt="our kubernetes pods restart")
    )
    second = context_of(
        hook("user-prompt-submit", cwd=project, prompt="our kubernetes pods restart")
    )
    assert len(re.findall(r"^- \[", first, re.M)) == 10
    assert len(re.findall(r"^- \[", second, re.M)) == 5
    assert not set(re.findall(r"\[(mem_\w+)\]", first)) & set(re.findall(r"\[(mem_\w+)\]", second))


def test_pre_compact_clears_the_window(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    project = make_project("app")
    note_id = _save(store, "Feature flags live in LaunchDarkly.", title="feature flags")
    prompt = "where are the feature flags configured?"
    assert f"[{note_id}]" in context_of(hook("user-prompt-submit", cwd=project, prompt=prompt))
    assert hook("user-prompt-submit", cwd=project, prompt=prompt) is None
    assert hook("pre-compact", cwd=project, trigger="auto", custom_instructions="") is None
    assert f"[{note_id}]" in context_of(hook("user-prompt-submit", cwd=project, prompt=prompt))


def test_trivial_prompts_inject_nothing(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    _save(store, "ok means the user agrees.", title="ok")
    for prompt in ("ok", "好的", "thanks!", "  "):
        assert hook("user-prompt-submit", cwd=make_project("app"), prompt=prompt) is None


def test_the_live_episode_is_never_retrieved_but_finished_ones_are(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, session_id="past", source="startup")
    for _ in range(3):
        hook(
            "user-prompt-submit", cwd=project, session_id="past", prompt="zebrafish migration plan"
        )
    hook("session-end", cwd=project, session_id="past", reason="other")

    hook("session-start", cwd=project, session_id="live", source="startup")
    hook("user-prompt-submit", cwd=project, session_id="live", prompt="quokka rollout checklist")
    later = context_of(
        hook("user-prompt-submit", cwd=project, session_id="live", prompt="quokka rollout status")
    )
    assert "quokka" not in later  # only in the live episode: never recalled
    recalled = context_of(
        hook("user-prompt-submit", cwd=project, session_id="live", prompt="zebrafish migration")
    )
    assert "zebrafish" in recalled


def test_user_statements_are_captured_saved_or_pending(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app", remote="git@github.com:acme/app.git")
    hook("user-prompt-submit", cwd=project, prompt="我们决定以后都用 PostgreSQL 做主数据库。")
    hook("user-prompt-submit", cwd=project, prompt="maybe we should switch to ruff")
    decisions = store.list(type="decision")
    assert [n.scope for n in decisions] == ["project:github.com_acme_app"]
    assert "PostgreSQL" in decisions[0].body
    pending = state.read("SELECT content, scope FROM mem_pending WHERE status = 'pending'")
    assert any("ruff" in row["content"] for row in pending)


def test_tool_use_becomes_an_observation_with_type_title_and_files(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, source="startup")
    calls = [
        (
            "Edit",
            {
                "file_path": f"{project}/web/src/auth.ts",
                "old_string": "x = 1",
                "new_string": "x = 2",
            },
            {"filePath": "..."},
        ),
        ("Write", {"file_path": f"{project}/notes.md", "content": "SECRET BODY\n" * 500}, {}),
        (
            "Bash",
            {"command": "pytest -q", "description": "Run tests"},
            {"stdout": "12 passed in 0.5s", "stderr": "", "interrupted": False},
        ),
        ("Bash", {"command": "export API_KEY=abcdef1234567890 && curl x"}, {"stdout": ""}),
        ("Read", {"file_path": f"{project}/README.md"}, {"type": "text"}),
        ("Grep", {"pattern": "TODO", "path": str(project)}, {"numFiles": 3}),
        ("TodoWrite", {"todos": []}, {}),
        ("mcp__claude-memory__memory_search", {"query": "x"}, {}),
        ("Bash", {"command": "pwd"}, {"stdout": str(project)}),
    ]
    for name, tool_input, response in calls:
        assert (
            hook(
                "post-tool-use",
                cwd=project,
                tool_name=name,
                tool_input=tool_input,
                tool_response=response,
                tool_use_id="toolu_1",
            )
            is None
        )
    rows = state.read(
        "SELECT kind, title, content FROM mem_episode_messages WHERE role = 'observation'"
        " ORDER BY id"
    )
    titles = [(r["kind"], r["title"]) for r in rows]
    assert titles == [
        ("change", "编辑 .../src/auth.ts"),
        ("change", "写入 notes.md"),
        ("how-it-works", "执行: pytest -q"),
        ("how-it-works", "执行: export API_KEY=[REDACTED:secret] && curl x"),
        ("discovery", "读取 README.md"),
        ("discovery", "搜索: TODO"),
    ]
    assert "files: web/src/auth.ts" in rows[0]["content"]
    assert "SECRET BODY" not in rows[1]["content"] and "wrote 500 lines" in rows[1]["content"]
    assert "12 passed" in rows[2]["content"]
    assert "abcdef1234567890" not in rows[3]["content"]
    (episode,) = _episodes(state, store).list()
    assert episode.file_changes == 2


def test_stop_records_the_last_reply_from_the_transcript_once(
    hook: Hook, make_project: Callable[..., Path], tmp_path: Path, state: StateDB
) -> None:
    project = make_project("app")
    transcript = tmp_path / "t.jsonl"
    lines = [
        {"type": "user", "message": {"role": "user", "content": "run the tests"}},
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "text", "text": "Running."}],
            },
        },
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        },
        {
            "type": "assistant",
            "message": {
                "id": "m2",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "All 12 tests pass.\n```py\nprint('code')\n```"}
                ],
            },
        },
        {
            "type": "assistant",
            "message": {
                "id": "m2",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Token: ghp_abcdefghijklmnopqrstuvwxyz0123456789"}
                ],
            },
        },
    ]
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    for _ in range(2):
        hook("stop", cwd=project, transcript_path=str(transcript), stop_hook_active=False)
    rows = state.read("SELECT content FROM mem_episode_messages WHERE role = 'assistant'")
    assert len(rows) == 1
    text = rows[0]["content"]
    assert text.startswith("All 12 tests pass.")
    assert "print('code')" not in text and "ghp_abcdefghij" not in text


def test_last_assistant_reply_reads_codex_rollouts(tmp_path: Path) -> None:
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text(
        json.dumps(
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Codex says hi"}],
                },
            }
        )
        + "\n"
    )
    assert last_assistant_reply(rollout) == "Codex says hi"
    assert last_assistant_reply(tmp_path / "missing.jsonl") == ""


def test_session_end_closes_with_a_summary_in_the_project_scope(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app", remote="https://github.com/acme/app")
    hook("session-start", cwd=project, source="startup")
    hook("user-prompt-submit", cwd=project, prompt="add rate limiting to the login endpoint")
    hook(
        "post-tool-use",
        cwd=project,
        tool_name="Edit",
        tool_input={"file_path": f"{project}/api/login.py", "old_string": "a", "new_string": "b"},
        tool_response={},
    )
    assert hook("session-end", cwd=project, reason="prompt_input_exit") is None
    (episode,) = _episodes(state, store).list()
    assert episode.status == "completed"
    assert "add rate limiting" in episode.summary and "api/login.py" in episode.summary
    note = store.get(episode.summary_note_id or "")
    assert note.scope == "project:github.com_acme_app" and note.path.startswith("sessions/")


def test_trivial_sessions_close_without_a_summary(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, source="startup")
    hook("user-prompt-submit", cwd=project, prompt="hi")
    hook("session-end", cwd=project, reason="other")
    (episode,) = _episodes(state, store).list()
    assert episode.status == "completed" and episode.summary == ""


def test_session_id_comes_from_the_newest_claude_transcript_when_missing(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app")
    folder = (
        Path(os.environ["CLAUDE_CONFIG_DIR"]) / "projects" / re.sub(r"[:\\/]", "-", str(project))
    )
    folder.mkdir(parents=True)
    (folder / "older.jsonl").write_text("{}\n")
    newest = folder / "2f6a8c9e-0000-4000-8000-000000000001.jsonl"
    newest.write_text("{}\n")
    os.utime(folder / "older.jsonl", (1, 1))
    hook("user-prompt-submit", cwd=project, session_id=None, prompt="hello there friend")
    (episode,) = _episodes(state, store).list()
    assert episode.key == "claude-code:2f6a8c9e-0000-4000-8000-000000000001"


def test_session_id_comes_from_the_newest_codex_rollout_when_missing(
    hook: Hook,
    make_project: Callable[..., Path],
    state: StateDB,
    store: MemoryStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    codex = tmp_path / "codex"
    monkeypatch.setenv("CODEX_HOME", str(codex))
    old_day = codex / "sessions" / "2025" / "01" / "09"
    new_day = codex / "sessions" / "2025" / "01" / "10"
    old_day.mkdir(parents=True)
    new_day.mkdir(parents=True)
    (old_day / "rollout-2025-01-09T10-00-00-11111111-1111-4111-8111-111111111111.jsonl").touch()
    (new_day / "rollout-2025-01-10T09-00-00-22222222-2222-4222-8222-222222222222.jsonl").touch()
    hook("user-prompt-submit", cwd=make_project("app"), session_id=None, prompt="hello codex user")
    (episode,) = _episodes(state, store).list()
    assert episode.key == "claude-code:22222222-2222-4222-8222-222222222222"


def test_a_generated_session_id_is_reused_by_later_events(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, session_id=None, source="startup")
    hook("user-prompt-submit", cwd=project, session_id=None, prompt="first real question here")
    hook(
        "post-tool-use",
        cwd=project,
        session_id=None,
        tool_name="Bash",
        tool_input={"command": "make build"},
        tool_response={"stdout": "done"},
    )
    (episode,) = _episodes(state, store).list()
    assert episode.key.startswith("claude-code:gen-")
    assert episode.turns == 1
    assert len(_episodes(state, store).messages(episode.id)) == 2


def test_two_projects_named_app_keep_separate_memories(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    app_a = make_project("client-a/app")
    app_b = make_project("client-b/app")
    hook("session-start", cwd=app_a, session_id="a1", source="startup")
    hook(
        "user-prompt-submit",
        cwd=app_a,
        session_id="a1",
        prompt="我们决定 billing 服务的数据库采用 CockroachDB。",
    )
    for n in range(3):
        hook("user-prompt-submit", cwd=app_a, session_id="a1", prompt=f"tune billing cache {n}")
    hook(
        "post-tool-use",
        cwd=app_a,
        session_id="a1",
        tool_name="Edit",
        tool_input={"file_path": f"{app_a}/billing/db.py", "old_string": "a", "new_string": "b"},
        tool_response={},
    )
    hook("session-end", cwd=app_a, session_id="a1", reason="other")

    b_start = context_of(hook("session-start", cwd=app_b, session_id="b1", source="startup"))
    assert "billing" not in b_start and "db.py" not in b_start
    b_prompt = context_of(
        hook(
            "user-prompt-submit",
            cwd=app_b,
            session_id="b1",
            prompt="which database does our billing use? CockroachDB?",
        )
    )
    assert "CockroachDB" not in b_prompt

    a_start = context_of(hook("session-start", cwd=app_a, session_id="a2", source="startup"))
    assert "billing/db.py" in a_start or "db.py" in a_start
    a_prompt = context_of(
        hook(
            "user-prompt-submit",
            cwd=app_a,
            session_id="a2",
            prompt="which database does our billing use? CockroachDB?",
        )
    )
    assert "CockroachDB" in a_prompt


def test_observation_rules_skip_noise_and_shorten_paths() -> None:
    assert observe_tool("TodoWrite", {}, None, "/r") is None
    assert observe_tool("Bash", {"command": "cd src"}, None, "/r") is None
    edit = observe_tool(
        "MultiEdit",
        {"file_path": "/r/a/b/c/d.py", "edits": [{"old_string": "x", "new_string": "y"}]},
        None,
        "/r",
    )
    assert edit is not None and edit.title == "编辑 .../c/d.py" and edit.files == ("a/b/c/d.py",)
    git = observe_tool("Bash", {"command": "git commit -m 'fix'"}, {"stdout": ""}, "/r")
    assert git is not None and git.kind == "change"
    status = observe_tool("Bash", {"command": "git status"}, {"stdout": ""}, "/r")
    assert status is not None and status.kind == "discovery"
    other = observe_tool("mcp__github__create_issue", {"title": "t"}, None, "/r")
    assert other is not None and other.title == "调用 mcp__github__create_issue"


def test_a_decision_captured_by_a_direct_hook_has_its_history(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    from memory.history.store import HistoryStore

    project = make_project("app")
    hook(
        "user-prompt-submit",
        cwd=project,
        session_id="s-42",
        prompt="我们决定以后都用 PostgreSQL 做主数据库。",
    )
    (decision,) = store.list(type="decision")
    (version,) = HistoryStore(state).versions(decision.id)
    assert version.kind == "create"
    assert (version.source.door, version.source.session) == ("claude-code", "s-42")


def test_a_prompt_counts_its_injected_notes_without_rewriting_their_files(
    hook: Hook, make_project: Callable[..., Path], store: MemoryStore
) -> None:
    """Rewriting an injected note's file on every prompt cost a direct hook ~65 ms; the
    count waits in the index and reaches the file at the session's next start or end."""
    project = make_project("app")
    saved = store.save(
        NoteDraft(
            content="The login rate limit is 5 attempts per minute per IP, set in gateway.yaml.",
            title="login rate limit",
            type="project",
        )
    )
    path = store.abspath(saved.path)
    before = path.read_bytes()
    recalled = context_of(
        hook(
            "user-prompt-submit",
            cwd=project,
            prompt="how is our login rate limit configured, as we noted?",
        )
    )
    assert saved.id in recalled
    assert path.read_bytes() == before
    assert store.get(saved.id).access_count == 1  # counted, in the index
    hook("session-start", cwd=project, session_id="next", source="startup")
    assert b"access_count: 1" in path.read_bytes()


def test_a_resumed_session_is_one_episode_and_gets_its_summary(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    # three `claude -p --resume` runs of one prompt each were three one-prompt episodes, none
    # worth a summary (the rule counted per episode), and a brief listed the session twice
    project = make_project("app")
    for n, source in enumerate(("startup", "resume", "resume")):
        hook("session-start", cwd=project, session_id="s-r", source=source)
        hook(
            "user-prompt-submit",
            cwd=project,
            session_id="s-r",
            prompt=f"step {n} of the gamma migration",
        )
        hook("session-end", cwd=project, session_id="s-r", reason="other")
    (episode,) = _episodes(state, store).list()
    assert episode.turns == 3 and episode.status == "completed"
    assert "gamma migration" in (episode.summary or "")
    brief = context_of(hook("session-start", cwd=project, session_id="s-new", source="startup"))
    listed = [line for line in brief.splitlines() if "gamma migration" in line]
    assert len(listed) == 1  # the session, listed once


def _a_session(hook: Hook, project: Path, session: str, prompts: tuple[str, ...]) -> None:
    hook("session-start", cwd=project, session_id=session, source="startup")
    for prompt in prompts:
        hook("user-prompt-submit", cwd=project, session_id=session, prompt=prompt)
    hook(
        "post-tool-use",
        cwd=project,
        session_id=session,
        tool_name="Bash",
        tool_input={"command": "pytest -q tests/billing"},
        tool_response={"stdout": "12 passed"},
    )
    hook("session-end", cwd=project, session_id=session, reason="other")


def test_an_english_users_brief_is_in_english(
    hook: Hook, make_project: Callable[..., Path]
) -> None:
    # issue #32: the titles the memory wrote (`app 开发会话 …`, `执行: …`) made an English
    # user's brief half Chinese
    project = make_project("billing")
    prompts = (
        "add a refund endpoint to the billing API",
        "then make the invoice totals include tax",
        "and run the billing tests",
    )
    _a_session(hook, project, "s-en", prompts)
    brief = context_of(hook("session-start", cwd=project, session_id="s-next", source="startup"))
    assert "billing coding session" in brief and "Ran: pytest -q tests/billing" in brief, brief
    assert not re.search(r"[\u4e00-\u9fff]", brief), brief


def test_a_pipe_in_an_observed_command_stays_a_pipe(
    hook: Hook, make_project: Callable[..., Path]
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, session_id="s-p", source="startup")
    hook("user-prompt-submit", cwd=project, session_id="s-p", prompt="count the sources")
    command = "ls src | wc -l"
    hook(
        "post-tool-use",
        cwd=project,
        session_id="s-p",
        tool_name="Bash",
        tool_input={"command": command},
        tool_response={"stdout": "12"},
    )
    brief = context_of(hook("session-start", cwd=project, session_id="s-q", source="startup"))
    # one table cell, escaped as Markdown tables escape it; it read `ls src / wc -l`
    assert "| Ran: ls src \\| wc -l |" in brief, brief


def test_a_chinese_users_brief_keeps_chinese_titles(
    hook: Hook, make_project: Callable[..., Path]
) -> None:
    project = make_project("billing")
    prompts = ("给账单接口加一个退款端点", "然后让发票总额包含税", "再跑一下账单的测试")
    _a_session(hook, project, "s-zh", prompts)
    brief = context_of(hook("session-start", cwd=project, session_id="s-next", source="startup"))
    assert "billing 开发会话" in brief and "执行: pytest -q tests/billing" in brief, brief
    assert "完成：" in brief  # the summary in the session's language


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("echo a > out.txt", "change"),
        ("echo a >> log.txt", "change"),
        ("python run.py > out.json 2>&1", "change"),
        ("ls | tee files.txt", "change"),
        ("cat a.txt > b.txt", "change"),
        ("rm -rf build", "change"),
        ("make 2>/dev/null", "how-it-works"),
        ("pytest -q 2>&1", "how-it-works"),
        ('echo "a > b"', "how-it-works"),
        ("grep -r TODO src > /dev/null", "discovery"),
        ("cat README.md", "discovery"),
    ],
)
def test_a_shell_command_that_writes_a_file_is_a_change(command: str, kind: str) -> None:
    # issue #32: `echo a > out.txt` was no change, so a one-prompt session that wrote a file
    # with the shell got no summary
    observation = observe_tool("Bash", {"command": command}, {"stdout": ""}, "/r")
    assert observation is not None
    assert (observation.kind, observation.changes) == (kind, int(kind == "change"))


def test_a_session_that_wrote_a_file_with_the_shell_gets_a_summary(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, session_id="s-w", source="startup")
    hook("user-prompt-submit", cwd=project, session_id="s-w", prompt="write the release notes")
    hook(
        "post-tool-use",
        cwd=project,
        session_id="s-w",
        tool_name="Bash",
        tool_input={"command": "echo 'v1.2: faster search' > RELEASE.md"},
        tool_response={"stdout": ""},
    )
    hook("session-end", cwd=project, session_id="s-w", reason="other")
    (episode,) = _episodes(state, store).list()
    assert episode.file_changes == 1
    assert "write the release notes" in episode.summary


def test_a_chinese_sessions_summary_names_its_files_in_chinese(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    # the files were labelled " | Files: " inside a Chinese summary
    project = make_project("app")
    hook("session-start", cwd=project, session_id="s-f", source="startup")
    for prompt in ("把登录接口改成用令牌", "再加上过期时间", "最后更新文档"):
        hook("user-prompt-submit", cwd=project, session_id="s-f", prompt=prompt)
    hook(
        "post-tool-use",
        cwd=project,
        session_id="s-f",
        tool_name="Edit",
        tool_input={
            "file_path": str(project / "src" / "auth.py"),
            "old_string": "password",
            "new_string": "token",
        },
        tool_response={"success": True},
    )
    hook("session-end", cwd=project, session_id="s-f", reason="other")
    (episode,) = _episodes(state, store).list()
    assert episode.summary.startswith("完成：把登录接口改成用令牌"), episode.summary
    assert "｜文件：src/auth.py" in episode.summary and "Files" not in episode.summary
