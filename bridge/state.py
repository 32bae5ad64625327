"""The Feishu bridge's state: dedup, chat generations, owner, the turns in flight, the outbox
and the cards' buttons. In its own SQLite file (`<home>/feishu.db`) on one instance, or in the
shared PostgreSQL database (tables `feishu_*`) when several instances answer one bot, so the
same event delivered to two instances is answered once.

* Dedup keys on the event id **and** the message id: Feishu re-pushes with the same event id,
  and a reconnect backfill can deliver the same message under a new event id. Rows are kept
  48 h (Feishu retries for at most ~7 h), so a restart never answers a message twice.
* A chat's generation N names its conversation `feishu:{chat_id}:v{N}`; `/clear` starts the
  one after the latest, `/resume <n>` goes back to an earlier one (`latest` keeps the highest
  ever used, so a `/clear` after a resume never lands on an existing conversation). The chat's
  model (`/model`) is kept beside it (NULL: the configured one).
* The owner is the first user who sent the right `/pair <code>` when no allowlist is set.
* A turn in flight has a row from the moment it is queued (`accepted`) through the model being
  asked (`started`, plus its progress card once shown) until it is answered; the rows left at
  start are what a crash interrupted (`FeishuBridge` recovers them).
* The outbox holds sends not yet delivered, keyed by their idempotency `uuid`; a row goes when
  the platform has accepted it.
* The buttons the bridge put on cards (`controls`, keyed by their unguessable nonce) outlive a
  restart: a `/forget` or "记住这个吗？" card tapped tomorrow still does what it says, and a Stop
  or approval button whose turn a restart ended says so instead of "not yours". Kept 7 days.

One class, `BridgeState`, for both databases: its SQL is written once (`storage.sql`: the
dialect fills in table names and column types). The websocket thread claims events while the
app loop reads generations: on SQLite one `SQLiteDB` connection (WAL, busy timeout, a writer
lock), on PostgreSQL the shared synchronous pool. Every call is a single short statement.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from storage.sql import Dialect, Row, open_tables

if TYPE_CHECKING:
    from storage.postgres import PostgresDatabase

DEDUP_KEEP_SECONDS = 48 * 3600
CONTROL_KEEP_SECONDS = 7 * 24 * 3600
SAID_KEEP_SECONDS = 30 * 24 * 3600
_PRUNE_EVERY_SECONDS = 3600.0

COMPONENT = "feishu"

# Written once for both databases (storage.sql): `{seen}` is `seen` in feishu.db and
# `feishu_seen` in the shared PostgreSQL database; `{REAL}` and the others are column types.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE {seen} (
        key TEXT PRIMARY KEY,
        seen_at {REAL} NOT NULL
    );
    CREATE INDEX {seen}_by_time ON {seen}(seen_at);
    CREATE TABLE {chats} (
        chat_id TEXT PRIMARY KEY,
        generation INTEGER NOT NULL,
        updated {REAL} NOT NULL
    );
    CREATE TABLE {owner} (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        open_id TEXT NOT NULL,
        paired_at {REAL} NOT NULL
    );
    """,
    """
    CREATE TABLE {turns} (
        message_id TEXT PRIMARY KEY,
        chat_id TEXT NOT NULL,
        message TEXT NOT NULL,
        stage TEXT NOT NULL,
        card_id TEXT,
        accepted_at {REAL} NOT NULL{SEQ}
    );
    CREATE TABLE {outbox} (
        key TEXT PRIMARY KEY,
        op TEXT NOT NULL,
        target TEXT NOT NULL,
        msg_type TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at {REAL} NOT NULL,
        attempts INTEGER NOT NULL,
        next_at {REAL} NOT NULL{SEQ}
    );
    CREATE INDEX {outbox}_by_due ON {outbox}(next_at);
    """,
    # Several instances may share the state (PostgreSQL): each turn names the instance that
    # runs it, and instances say they are alive, so a start recovers only what a dead one left.
    """
    ALTER TABLE {turns} ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    CREATE TABLE {instances} (
        id TEXT PRIMARY KEY,
        seen_at {REAL} NOT NULL
    );
    """,
    # /resume and /model: the highest generation a chat ever had, and its chosen model.
    """
    ALTER TABLE {chats} ADD COLUMN latest INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE {chats} ADD COLUMN model TEXT;
    """,
    # card buttons that outlive a restart
    """
    CREATE TABLE {controls} (
        nonce TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        message_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        message TEXT NOT NULL,
        data TEXT NOT NULL,
        done {BOOL} NOT NULL DEFAULT {FALSE},
        created_at {REAL} NOT NULL
    );
    CREATE INDEX {controls}_by_time ON {controls}(created_at);
    """,
    # what a turn's card showed (a restart closes the card with it, not over it) and the
    # CardKit card entity behind a streamed card (closed through CardKit, not an IM PATCH)
    """
    ALTER TABLE {turns} ADD COLUMN partial TEXT NOT NULL DEFAULT '';
    ALTER TABLE {turns} ADD COLUMN entity TEXT;
    """,
    # what the bot's answer cards said: Feishu does not return a JSON 2.0 card's content, so a
    # member quoting an answer gets it from here
    """
    CREATE TABLE {said} (
        message_id TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        said_at {REAL} NOT NULL
    );
    CREATE INDEX {said}_by_time ON {said}(said_at);
    """,
    # approvals for a team: who approves tool calls in a chat (besides owners and admins), and
    # the calls a chat always allows
    """
    CREATE TABLE {approvers} (
        chat_id TEXT NOT NULL,
        open_id TEXT NOT NULL,
        added_by TEXT NOT NULL,
        added_at {REAL} NOT NULL,
        PRIMARY KEY (chat_id, open_id)
    );
    CREATE TABLE {allowed} (
        chat_id TEXT NOT NULL,
        rule TEXT NOT NULL,
        added_by TEXT NOT NULL,
        added_at {REAL} NOT NULL,
        PRIMARY KEY (chat_id, rule)
    );
    """,
)

TABLES = (
    "seen",
    "chats",
    "owner",
    "turns",
    "outbox",
    "instances",
    "controls",
    "said",
    "approvers",
    "allowed",
)
SQLITE = Dialect.sqlite(*TABLES)
POSTGRESQL = Dialect.postgresql(*TABLES, prefix="feishu_")

TurnStage = Literal["accepted", "started"]
OutboxOp = Literal["reply", "patch", "card"]


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """A user's message taken for a turn and not answered yet."""

    message_id: str
    chat_id: str
    message: str  # the parsed message as JSON (bridge.events.message_to_json)
    stage: TurnStage  # accepted: nothing reached the model yet; started: the model was asked
    card_id: str | None  # the progress card, once shown
    accepted_at: float
    partial: str = ""  # the answer's text so far, as last saved
    entity: str | None = None  # the CardKit card entity when the card is a streamed one


@dataclass(frozen=True, slots=True)
class SavedControl:
    """A button on a card the bridge sent: its kind (stop / approval / forget / pending), the
    card's message id, the user's message it answered (JSON, as in `PendingTurn`) and what the
    kind needs to act (JSON: the notes a `/forget` card offers, the capture's pending id)."""

    nonce: str
    kind: str
    message_id: str
    conversation_id: str
    message: str
    data: str
    done: bool
    created_at: float


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One send the platform has not accepted yet: a reply to `target`, a PATCH of card
    `target`, or (`card`) the final state of CardKit card entity `target`. `key` is the send's
    idempotency uuid (Feishu keeps one message per uuid for 1 h)."""

    key: str
    op: OutboxOp
    target: str
    msg_type: str
    content: str  # JSON, as sent
    created_at: float
    attempts: int = 0
    next_at: float = 0.0


class BridgeStateBackend(Protocol):
    """What the Feishu bridge needs from its state: `BridgeState`, on SQLite (one instance) or
    PostgreSQL (shared, so an event re-delivered to another instance is still answered once);
    `tests/storage` runs one contract suite against both. Every call is short and synchronous
    and may come from the websocket thread."""

    def close(self) -> None: ...

    def claim(self, event_id: str, message_id: str, *, now: float | None = None) -> bool:
        """Record an event; True if neither its event id nor its message id was seen before."""
        ...

    def release(self, event_id: str, message_id: str) -> None:
        """Forget a claim (the event could not be handed over; Feishu will push it again)."""
        ...

    def prune(self, *, now: float | None = None) -> int:
        """Forget claims older than the keep window; returns how many rows went."""
        ...

    def generation(self, chat_id: str) -> int:
        """The chat's current generation (1 for a chat never cleared)."""
        ...

    def bump_generation(self, chat_id: str) -> int:
        """Start the chat's next conversation (after the latest it ever had); returns the new
        generation."""
        ...

    def latest_generation(self, chat_id: str) -> int:
        """The highest generation the chat ever had (1 for a chat never cleared)."""
        ...

    def set_generation(self, chat_id: str, generation: int) -> bool:
        """Go back to an earlier conversation of the chat; False (nothing changes) unless
        1 <= generation <= the latest."""
        ...

    def model(self, chat_id: str) -> str | None:
        """The chat's chosen model (None: the configured one)."""
        ...

    def set_model(self, chat_id: str, model: str | None) -> None: ...

    def owner(self) -> str | None: ...

    def set_owner(self, open_id: str) -> bool:
        """Make `open_id` the owner unless there already is one; True if it became the owner."""
        ...

    def turn_accepted(
        self,
        message_id: str,
        chat_id: str,
        message: str,
        *,
        now: float | None = None,
        owner: str = "",
    ) -> None:
        """A message was queued for a turn (stage `accepted`) by instance `owner`."""
        ...

    def alive(self, instance: str, *, now: float | None = None) -> None:
        """Instance `instance` is running (a heartbeat)."""
        ...

    def turn_started(self, message_id: str) -> None:
        """The message is on its way to the model (stage `started`)."""
        ...

    def turn_card(self, message_id: str, card_id: str, entity: str | None = None) -> None:
        """The turn's card was shown (`entity`: the CardKit card entity of a streamed one)."""
        ...

    def turn_partial(self, message_id: str, text: str) -> None:
        """The answer's text so far (a restart closes the turn's card with it)."""
        ...

    def turn_finished(self, message_id: str) -> None:
        """The message got its answer (or a notice); forget it."""
        ...

    def unfinished_turns(
        self, *, owner: str | None = None, dead_before: float | None = None
    ) -> list[PendingTurn]:
        """Turns accepted and never finished, oldest first. With `owner`: only that instance's,
        those of no instance, and those of instances last alive before `dead_before` (the
        others are still being answered elsewhere)."""
        ...

    def outbox_put(self, item: OutboxItem) -> None:
        """Keep a send for later; a second put with the same key changes nothing."""
        ...

    def outbox_due(self, *, now: float | None = None, limit: int = 20) -> list[OutboxItem]:
        """Sends whose next attempt is due, oldest first."""
        ...

    def outbox_retry(self, key: str, next_at: float) -> None:
        """Count a failed attempt and schedule the next one."""
        ...

    def outbox_done(self, key: str) -> None:
        """The send was delivered (or given up); forget it."""
        ...

    def control_put(self, control: SavedControl) -> None:
        """Keep a card's button (the same nonce again replaces it)."""
        ...

    def control_get(self, nonce: str) -> SavedControl | None:
        """The button with this nonce, if kept (CONTROL_KEEP_SECONDS)."""
        ...

    def control_done(self, nonce: str) -> None:
        """The button's choice was made: later taps read "already decided"."""
        ...

    def open_controls(self, kind: str) -> list[SavedControl]:
        """Buttons of `kind` whose choice was not made yet, oldest first."""
        ...

    def said_put(self, message_ids: list[str], text: str, *, now: float | None = None) -> None:
        """The bot's messages `message_ids` showed `text` (an answer, kept SAID_KEEP_SECONDS)."""
        ...

    def said(self, message_id: str) -> str | None:
        """What the bot's message showed, if kept."""
        ...

    def approvers(self, chat_id: str) -> list[str]:
        """The members who approve tool calls in this chat, in the order they were added."""
        ...

    def set_approver(self, chat_id: str, open_id: str, *, by: str, on: bool) -> bool:
        """Add (`on`) or remove an approver; True when that changed something."""
        ...

    def allowed_rules(self, chat_id: str) -> list[str]:
        """The calls this chat always allows ("always allow here"), oldest first."""
        ...

    def set_allowed(self, chat_id: str, rule: str, *, by: str, on: bool) -> bool:
        """Remember (`on`) or forget an "always allow here" rule; True when that changed
        something."""
        ...


# The chat's highest generation ever, as an expression over its row; in an upsert the old
# row's columns need the table's name.
_LATEST = "CASE WHEN generation > latest THEN generation ELSE latest END"
_OLD_LATEST = (
    "CASE WHEN {chats}.generation > {chats}.latest THEN {chats}.generation ELSE {chats}.latest END"
)
_TURN = "message_id, chat_id, message, stage, card_id, accepted_at"
_OUTBOX = "key, op, target, msg_type, content, created_at, attempts, next_at"
_CONTROL = "nonce, kind, message_id, conversation_id, message, data, done, created_at"


class BridgeState:
    """`BridgeStateBackend` in the SQLite file `where` (one instance) or in the shared
    PostgreSQL database `where` (several); safe to call from several threads.

    Every call is one statement, atomic on its own in both databases: `claim` inserts both dedup
    keys with `ON CONFLICT DO NOTHING ... RETURNING`, fresh only if both rows are new (two
    instances claiming at once serialize on the unique index, so exactly one wins);
    `bump_generation` is one upsert that increments in place."""

    def __init__(
        self, where: Path | PostgresDatabase, *, keep_seconds: float = DEDUP_KEEP_SECONDS
    ) -> None:
        self.keep_seconds = keep_seconds
        self._sql = open_tables(where, sqlite=SQLITE, postgresql=POSTGRESQL)
        self._sql.migrate(COMPONENT, MIGRATIONS)
        self._pruned_at = 0.0
        self.prune()

    def close(self) -> None:
        self._sql.close()

    # --- dedup -----------------------------------------------------------------------------------
    def claim(self, event_id: str, message_id: str, *, now: float | None = None) -> bool:
        """Record an event; True if neither its event id nor its message id was seen before."""
        now = time.time() if now is None else now
        with self._sql.write() as db:
            inserted = db.execute(
                "INSERT INTO {seen}(key, seen_at) VALUES (?, ?), (?, ?)"
                " ON CONFLICT (key) DO NOTHING RETURNING key",
                (f"event:{event_id}", now, f"message:{message_id}", now),
            ).fetchall()
        if now - self._pruned_at > _PRUNE_EVERY_SECONDS:
            self.prune(now=now)
        return len(inserted) == 2

    def release(self, event_id: str, message_id: str) -> None:
        """Forget a claim (the event could not be handed over; Feishu will push it again)."""
        with self._sql.write() as db:
            db.execute(
                "DELETE FROM {seen} WHERE key IN (?, ?)",
                (f"event:{event_id}", f"message:{message_id}"),
            )

    def prune(self, *, now: float | None = None) -> int:
        now = time.time() if now is None else now
        self._pruned_at = now
        with self._sql.write() as db:
            cursor = db.execute("DELETE FROM {seen} WHERE seen_at < ?", (now - self.keep_seconds,))
            db.execute("DELETE FROM {controls} WHERE created_at < ?", (now - CONTROL_KEEP_SECONDS,))
            db.execute("DELETE FROM {said} WHERE said_at < ?", (now - SAID_KEEP_SECONDS,))
            return cursor.rowcount

    # --- chat generations ------------------------------------------------------------------------
    def generation(self, chat_id: str) -> int:
        rows = self._sql.read("SELECT generation FROM {chats} WHERE chat_id = ?", (chat_id,))
        return int(rows[0]["generation"]) if rows else 1

    def bump_generation(self, chat_id: str) -> int:
        """Start the chat's next conversation; returns the new generation."""
        with self._sql.write() as db:
            row = db.execute(
                "INSERT INTO {chats}(chat_id, generation, latest, updated) VALUES (?, 2, 2, ?)"
                f" ON CONFLICT (chat_id) DO UPDATE SET generation = {_OLD_LATEST} + 1,"
                f" latest = {_OLD_LATEST} + 1, updated = excluded.updated RETURNING generation",
                (chat_id, time.time()),
            ).fetchone()
        return int(row["generation"])

    def latest_generation(self, chat_id: str) -> int:
        rows = self._sql.read(
            f"SELECT {_LATEST} AS latest FROM {{chats}} WHERE chat_id = ?", (chat_id,)
        )
        return int(rows[0]["latest"]) if rows else 1

    def set_generation(self, chat_id: str, generation: int) -> bool:
        if generation < 1:
            return False
        with self._sql.write() as db:
            # One statement: only a generation within the chat's known ones is taken (a chat
            # never cleared has only generation 1, which needs no row).
            if generation == 1:
                db.execute(
                    "INSERT INTO {chats}(chat_id, generation, latest, updated) VALUES (?, 1, 1, ?)"
                    f" ON CONFLICT (chat_id) DO UPDATE SET generation = 1, latest = {_OLD_LATEST},"
                    " updated = excluded.updated",
                    (chat_id, time.time()),
                )
                return True
            cursor = db.execute(
                f"UPDATE {{chats}} SET latest = {_LATEST}, generation = ?, updated = ?"
                f" WHERE chat_id = ? AND {_LATEST} >= ?",
                (generation, time.time(), chat_id, generation),
            )
            return cursor.rowcount == 1

    def model(self, chat_id: str) -> str | None:
        rows = self._sql.read("SELECT model FROM {chats} WHERE chat_id = ?", (chat_id,))
        return str(rows[0]["model"]) if rows and rows[0]["model"] else None

    def set_model(self, chat_id: str, model: str | None) -> None:
        with self._sql.write() as db:
            db.execute(
                "INSERT INTO {chats}(chat_id, generation, latest, updated, model)"
                " VALUES (?, 1, 1, ?, ?) ON CONFLICT (chat_id) DO UPDATE SET"
                " model = excluded.model, updated = excluded.updated",
                (chat_id, time.time(), model),
            )

    # --- owner -----------------------------------------------------------------------------------
    def owner(self) -> str | None:
        rows = self._sql.read("SELECT open_id FROM {owner} WHERE id = 1")
        return str(rows[0]["open_id"]) if rows else None

    def set_owner(self, open_id: str) -> bool:
        """Make `open_id` the owner unless there already is one; True if it became the owner."""
        with self._sql.write() as db:
            cursor = db.execute(
                "INSERT INTO {owner}(id, open_id, paired_at) VALUES (1, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (open_id, time.time()),
            )
            return cursor.rowcount == 1

    # --- turns in flight -------------------------------------------------------------------------
    def turn_accepted(
        self,
        message_id: str,
        chat_id: str,
        message: str,
        *,
        now: float | None = None,
        owner: str = "",
    ) -> None:
        with self._sql.write() as db:
            db.execute(
                "INSERT INTO {turns}(message_id, chat_id, message, stage, accepted_at, owner)"
                " VALUES (?, ?, ?, 'accepted', ?, ?) ON CONFLICT (message_id) DO NOTHING",
                (message_id, chat_id, message, time.time() if now is None else now, owner),
            )

    def alive(self, instance: str, *, now: float | None = None) -> None:
        with self._sql.write() as db:
            db.execute(
                "INSERT INTO {instances}(id, seen_at) VALUES (?, ?)"
                " ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
                (instance, time.time() if now is None else now),
            )

    def turn_started(self, message_id: str) -> None:
        with self._sql.write() as db:
            db.execute("UPDATE {turns} SET stage = 'started' WHERE message_id = ?", (message_id,))

    def turn_card(self, message_id: str, card_id: str, entity: str | None = None) -> None:
        with self._sql.write() as db:
            db.execute(
                "UPDATE {turns} SET card_id = ?, entity = ? WHERE message_id = ?",
                (card_id, entity, message_id),
            )

    def turn_partial(self, message_id: str, text: str) -> None:
        with self._sql.write() as db:
            db.execute("UPDATE {turns} SET partial = ? WHERE message_id = ?", (text, message_id))

    def turn_finished(self, message_id: str) -> None:
        with self._sql.write() as db:
            db.execute("DELETE FROM {turns} WHERE message_id = ?", (message_id,))

    def unfinished_turns(
        self, *, owner: str | None = None, dead_before: float | None = None
    ) -> list[PendingTurn]:
        rows = self._sql.read(
            "SELECT t.message_id, t.chat_id, t.message, t.stage, t.card_id, t.accepted_at,"
            " t.partial, t.entity FROM {turns} t LEFT JOIN {instances} i ON i.id = t.owner"
            " WHERE CAST(? AS TEXT) IS NULL OR t.owner IN ('', ?) OR i.seen_at IS NULL"
            " OR i.seen_at < ? ORDER BY t.accepted_at, t.{ORDER}",
            (owner, owner, dead_before if dead_before is not None else float("inf")),
        )
        return [
            PendingTurn(
                str(r["message_id"]),
                str(r["chat_id"]),
                str(r["message"]),
                r["stage"],
                r["card_id"],
                float(r["accepted_at"]),
                str(r["partial"] or ""),
                r["entity"],
            )
            for r in rows
        ]

    # --- outbox ----------------------------------------------------------------------------------
    def outbox_put(self, item: OutboxItem) -> None:
        with self._sql.write() as db:
            db.execute(
                f"INSERT INTO {{outbox}}({_OUTBOX}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (key) DO NOTHING",
                (
                    item.key,
                    item.op,
                    item.target,
                    item.msg_type,
                    item.content,
                    item.created_at,
                    item.attempts,
                    item.next_at,
                ),
            )

    def outbox_due(self, *, now: float | None = None, limit: int = 20) -> list[OutboxItem]:
        now = time.time() if now is None else now
        rows = self._sql.read(
            f"SELECT {_OUTBOX} FROM {{outbox}} WHERE next_at <= ?"
            " ORDER BY created_at, {ORDER} LIMIT ?",
            (now, limit),
        )
        return [
            OutboxItem(
                str(r["key"]),
                r["op"],
                str(r["target"]),
                str(r["msg_type"]),
                str(r["content"]),
                float(r["created_at"]),
                int(r["attempts"]),
                float(r["next_at"]),
            )
            for r in rows
        ]

    def outbox_retry(self, key: str, next_at: float) -> None:
        with self._sql.write() as db:
            db.execute(
                "UPDATE {outbox} SET attempts = attempts + 1, next_at = ? WHERE key = ?",
                (next_at, key),
            )

    def outbox_done(self, key: str) -> None:
        with self._sql.write() as db:
            db.execute("DELETE FROM {outbox} WHERE key = ?", (key,))

    # --- card buttons ----------------------------------------------------------------------------
    def control_put(self, control: SavedControl) -> None:
        with self._sql.write() as db:
            db.execute(
                f"INSERT INTO {{controls}}({_CONTROL}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (nonce) DO UPDATE SET kind = excluded.kind,"
                " message_id = excluded.message_id, conversation_id = excluded.conversation_id,"
                " message = excluded.message, data = excluded.data, done = excluded.done,"
                " created_at = excluded.created_at",
                (
                    control.nonce,
                    control.kind,
                    control.message_id,
                    control.conversation_id,
                    control.message,
                    control.data,
                    control.done,
                    control.created_at,
                ),
            )

    def control_get(self, nonce: str) -> SavedControl | None:
        rows = self._sql.read(f"SELECT {_CONTROL} FROM {{controls}} WHERE nonce = ?", (nonce,))
        return _control(rows[0]) if rows else None

    def control_done(self, nonce: str) -> None:
        with self._sql.write() as db:
            db.execute("UPDATE {controls} SET done = TRUE WHERE nonce = ?", (nonce,))

    def said_put(self, message_ids: list[str], text: str, *, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._sql.write() as db:
            for message_id in message_ids:
                db.execute(
                    "INSERT INTO {said}(message_id, text, said_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (message_id) DO UPDATE SET text = excluded.text,"
                    " said_at = excluded.said_at",
                    (message_id, text, now),
                )

    def said(self, message_id: str) -> str | None:
        rows = self._sql.read("SELECT text FROM {said} WHERE message_id = ?", (message_id,))
        return str(rows[0]["text"]) if rows else None

    # --- approvals for a team --------------------------------------------------------------------
    def approvers(self, chat_id: str) -> list[str]:
        return self._chat_set("approvers", "open_id", chat_id)

    def set_approver(self, chat_id: str, open_id: str, *, by: str, on: bool) -> bool:
        return self._put_in_chat_set("approvers", "open_id", chat_id, open_id, by=by, on=on)

    def allowed_rules(self, chat_id: str) -> list[str]:
        return self._chat_set("allowed", "rule", chat_id)

    def set_allowed(self, chat_id: str, rule: str, *, by: str, on: bool) -> bool:
        return self._put_in_chat_set("allowed", "rule", chat_id, rule, by=by, on=on)

    def _chat_set(self, table: str, column: str, chat_id: str) -> list[str]:
        """A chat's members of a set kept per chat (its approvers, its always-allowed calls),
        oldest first. `table` and `column` are this module's names, never input."""
        rows = self._sql.read(
            f"SELECT {column} FROM {{{table}}} WHERE chat_id = ? ORDER BY added_at, {column}",
            (chat_id,),
        )
        return [str(r[column]) for r in rows]

    def _put_in_chat_set(
        self, table: str, column: str, chat_id: str, value: str, *, by: str, on: bool
    ) -> bool:
        """Add (`on`) or remove `value`; whether anything changed."""
        with self._sql.write() as db:
            if on:
                cursor = db.execute(
                    f"INSERT INTO {{{table}}}(chat_id, {column}, added_by, added_at)"
                    f" VALUES (?, ?, ?, ?) ON CONFLICT (chat_id, {column}) DO NOTHING",
                    (chat_id, value, by, time.time()),
                )
            else:
                cursor = db.execute(
                    f"DELETE FROM {{{table}}} WHERE chat_id = ? AND {column} = ?", (chat_id, value)
                )
            return cursor.rowcount == 1

    def open_controls(self, kind: str) -> list[SavedControl]:
        rows = self._sql.read(
            f"SELECT {_CONTROL} FROM {{controls}} WHERE kind = ? AND done = FALSE"
            " ORDER BY created_at",
            (kind,),
        )
        return [_control(r) for r in rows]


def _control(row: Row) -> SavedControl:
    return SavedControl(
        str(row["nonce"]),
        str(row["kind"]),
        str(row["message_id"]),
        str(row["conversation_id"]),
        str(row["message"]),
        str(row["data"]),
        bool(row["done"]),
        float(row["created_at"]),
    )
