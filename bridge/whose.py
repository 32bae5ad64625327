"""Whose memory a Feishu message reads and writes (pure; docs/feishu.md, "Whose memory").

* The machine owner (the paired owner, or the first user of `FEISHU_ALLOWED_USERS`) is the
  person whose memory Claude Code and Codex share on this machine: their turns read their own
  scopes (`user`, `project:<key>`, `chat:<id>`; never a member's or a team's) and what they
  said in groups (`person:<open_id>`), and save to `user`, in their direct chat as today. In
  a group, where every member reads the answer, their turns read like any member's: the
  group's team notes and what the owner said in groups, never their own memory (asking in the
  direct chat gets that).
* Any other member's turns read only their own notes (`person:<open_id>`), in a group also
  the group's team notes (`team:<chat_id>`), and save to their own scope: what they ask to
  remember, what the agent saves in their turn, and what is captured from their words.
* A group's team notes are saved on purpose only, with `/team-remember` by the assistant's
  owners or the group's owner and admins (`bridge.rights`), never by a turn.

`forgettable` says which notes a `/forget` may delete: the sender's own, and the group's team
notes for those who may save them.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.model import Reader, person_scope, team_scope

WHOSE_INSTRUCTIONS = """\
# Whose memory, in this Feishu chat
Each person here has a memory of their own. In a turn, the memory you are given and your memory \
tools reach only the speaker's own notes (and, in a group, the group's team notes), and what you \
save goes to the speaker's own notes: never present one member's notes as another's, or as the \
group's. A group's team memory is saved on purpose by the group's owner or admins with \
`/team-remember <text>`; suggest that when something should hold for the whole group."""
"""What the model is told about whose memory it reads in Feishu (the system prompt, with
`bridge.outputs.FILES_INSTRUCTIONS`)."""


def memory_owner(*, paired: str | None, allowed_users: Sequence[str]) -> str | None:
    """The machine owner's open_id: the first user `FEISHU_ALLOWED_USERS` names, else the
    paired owner (None: nobody yet)."""
    return allowed_users[0] if allowed_users else paired


def reader_of(*, sender: str, chat_id: str, in_group: bool, owner: str | None) -> Reader:
    """Whose memory a message of `sender` in `chat_id` reads and saves to."""
    team = (team_scope(chat_id),) if in_group else ()
    if sender and sender == owner and not in_group:
        return Reader(owner=True, scopes=(person_scope(sender),), saves_to="user")
    if not sender:  # no one to keep it for: the group's team notes only, saved nowhere
        return Reader(owner=False, scopes=team, saves_to=None)
    own = person_scope(sender)
    return Reader(owner=False, scopes=(own, *team), saves_to=own)


def forgettable(scope: str, *, reader: Reader, chat_id: str, keeps_team: bool) -> bool:
    """Whether a note of `scope` may be deleted by a `/forget` of `reader` in `chat_id`: the
    reader's own notes, and the group's team notes when the sender may save them
    (`keeps_team`: the "team" right)."""
    if reader.writes(scope):
        return True
    return keeps_team and scope == team_scope(chat_id) and reader.reads(scope)
