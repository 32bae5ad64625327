"""What waits for the user's choice: captured candidates (`pend_…`) and contradicting notes
(`sup_…`), listed by memory_review and settled by memory_resolve."""

from __future__ import annotations

from errors import ClaudeMemoryError, InvalidInputError
from memory.clients.mcp_tools.context import ToolContext
from memory.clients.mcp_tools.schema import Arguments
from memory.history.conflicts import ConflictStore, keep_choice
from memory.loop.entities import confirm_pending


def memory_review(ctx: ToolContext, args: Arguments) -> str:
    everything = args.text("status") == "all"
    limit = args.whole("limit", 50)
    lines = []
    for p in ctx.pending.list(None if everything else "pending", limit):
        lines.append(
            f"{p.id} · {p.status} · {p.type} · confidence {p.confidence:.2f} · {p.scope}: "
            f"{p.content}"
        )
    for sup in ConflictStore(ctx.state).list(None if everything else "pending", limit):
        choice = f"kept {sup.keep}" if sup.keep else "pending"
        lines.append(f"{sup.id} · {choice} · {sup.reason}")
        for side, note_id in (("new", sup.new_id), ("old", sup.old_id)):
            try:
                note = ctx.store.get(note_id)
                lines.append(f"  {side} [{note_id}] {note.status}: {note.body.strip()}")
            except ClaudeMemoryError:
                lines.append(f"  {side} [{note_id}] (deleted)")
    return "\n".join(lines) or "Nothing pending."


def memory_resolve(ctx: ToolContext, args: Arguments) -> str:
    item, choice = args.required("id"), args.required("choice")
    if item.startswith("sup_"):
        if choice not in ("new", "old", "both"):
            raise InvalidInputError(f"choice: {item} is settled with new, old or both")
        sup = ConflictStore(ctx.state).resolve(ctx.store, item, keep_choice(choice))
        return f"Resolved {sup.id}: kept {sup.keep} ([{sup.new_id}] new, [{sup.old_id}] old)."
    if choice not in ("confirm", "reject"):
        raise InvalidInputError(f"choice: {item} is settled with confirm or reject")
    if choice == "reject":
        return f"Rejected {ctx.pending.resolve(item, 'rejected').id}."
    entity = ctx.pending.get(item)
    if entity.proposed:  # a model's change: a model may not wave it through
        raise InvalidInputError(
            f"{item} is a memory change that waits for the person's own confirmation (the "
            "memory page, or its Feishu card); it cannot be confirmed from here"
        )
    # the one confirm (the HTTP route's too): final, a rejected one stays rejected
    already = entity.status == "confirmed"
    _, note_id, _ = confirm_pending(ctx.store, ctx.pending, item)
    if already:
        return f"Already confirmed as [{note_id}]."
    return f"Confirmed {item}: saved as [{note_id}]."
