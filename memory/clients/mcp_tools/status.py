"""memory_status (counts, this session's episode, the encoder) and memory_cleanup, the one
tool that deletes: it refuses unless `confirm` is the JSON true."""

from __future__ import annotations

from typing import Any

from memory.clients.hooks import clear_window
from memory.clients.mcp_tools.context import ToolContext
from memory.clients.mcp_tools.notes import episode_line
from memory.clients.mcp_tools.schema import Arguments


def memory_status(ctx: ToolContext, args: Arguments) -> str:
    stats = ctx.store.stats()
    state = ctx.state
    sessions = {
        r["status"]: r["n"]
        for r in state.read("SELECT status, count(*) AS n FROM mem_episodes GROUP BY status")
    }
    observations = state.read(
        "SELECT count(*) AS n FROM mem_episode_messages WHERE role = 'observation'"
    )[0]["n"]
    waiting = state.read("SELECT count(*) AS n FROM mem_pending WHERE status = 'pending'")[0]["n"]
    conflicts = state.read("SELECT count(*) AS n FROM mem_supersessions WHERE status = 'pending'")[
        0
    ]["n"]
    types = ", ".join(f"{n} {t}" for t, n in stats["by_type"].items() if n)
    statuses = ", ".join(f"{n} {s}" for s, n in stats["by_status"].items() if n)
    current = ctx.current_episode()
    lines = [
        f"Notes: {stats['total']} ({statuses or 'none'})"
        + (f"; by type: {types}" if types else ""),
        f"Sessions: {sessions.get('active', 0)} active, {sessions.get('completed', 0)} completed; "
        f"observations: {observations}",
        f"Waiting for the user: {waiting} captured, {conflicts} contradictions (memory_review)",
        f"Project: {ctx.project.name} ({ctx.project.key}), scope {ctx.project.scope}",
        "This session: "
        + (
            f"{episode_line(current)} ({current.key}, {current.turns} prompts)"
            if current
            else "none recorded"
        ),
        encoder_line(stats["encoder"]),
        f"Home: {ctx.home}",
    ]
    return "\n".join(lines)


def encoder_line(encoder: dict[str, Any]) -> str:
    """`Search: ...` with the encoder's state and the notes' vectors; searches never wait."""
    vectors = encoder.get("vectors") or {}
    state = encoder.get("state", "disabled")
    how = "hybrid (keywords + vectors)" if state == "ready" else "keywords only"
    line = f"Search: {how}; encoder: {state}"
    if encoder.get("name"):
        line += f" ({encoder['name']})"
    if vectors:
        line += (
            f"; vectors: {vectors.get('embedded', 0)} of {vectors.get('notes', 0)} notes, "
            f"{vectors.get('missing', 0)} missing, {vectors.get('stale', 0)} stale"
        )
    return line


def memory_cleanup(ctx: ToolContext, args: Arguments) -> str:
    if not args.flag("confirm"):
        # older_than_days=0 once deleted every recorded message and observation unasked
        return (
            "Refused: memory_cleanup deletes recorded messages and observations for good. "
            "Call it again with confirm: true if the user really wants that."
        )
    episode_id = args.text("episode_id")
    if episode_id:
        episode = ctx.episodes.get(episode_id)  # NotFoundError names it
        with ctx.state.write() as db:
            deleted = db.execute(
                "DELETE FROM mem_episode_messages WHERE episode_id = ?", (episode.id,)
            ).rowcount
        clear_window(ctx.state, episode.key)
        return f"Deleted {deleted} messages and observations of {episode.id}."
    days = args.number("older_than_days", 7.0) or 0.0
    deleted = ctx.episodes.cleanup_messages(days)
    return f"Deleted {deleted} messages of finished sessions older than {days:g} days."
