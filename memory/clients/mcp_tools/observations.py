"""Seed 004's progressive disclosure over what past sessions did: search_observations ->
observation_timeline -> get_observations."""

from __future__ import annotations

from memory.clients.mcp_tools.context import ToolContext
from memory.clients.mcp_tools.notes import episode_line, when
from memory.clients.mcp_tools.schema import Arguments


def search_observations(ctx: ToolContext, args: Arguments) -> str:
    project = None if args.flag("all_projects") else ctx.project.key
    hits = ctx.episodes.search_observations(
        args.required("query"), project=project, limit=args.whole("limit", 10)
    )
    if not hits:
        return "No observations found."
    lines = [
        f"#{h.message.id} {h.message.kind} · {h.message.title} · {when(h.message.created)} · "
        f"{h.episode.title}"
        for h in hits
    ]
    return "\n".join([*lines, "Next: observation_timeline(id) or get_observations(ids)."])


def observation_timeline(ctx: ToolContext, args: Arguments) -> str:
    anchor = args.whole("id", 0)
    episode, messages = ctx.episodes.timeline(
        anchor, before=args.whole("before", 3), after=args.whole("after", 3)
    )
    lines = [episode_line(episode), ""]
    for m in messages:
        mark = ">" if m.id == anchor else " "
        head = f"{mark}#{m.id} {m.role}" + (f"/{m.kind}" if m.role == "observation" else "")
        words = " ".join(m.content.split())
        lines.append(f"{head} · {when(m.created)} · {m.title or words[:160]}")
    return "\n".join(lines)


def get_observations(ctx: ToolContext, args: Arguments) -> str:
    found = ctx.episodes.observations(args.wholes("ids"))
    if not found:
        return "No observations with those ids."
    return "\n\n".join(
        f"#{m.id} {m.kind} · {m.title} · {when(m.created)}\n{m.content}" for m in found
    )
