"""The bridge's own cards (JSON 2.0: buttons straight in the elements, callback values are
objects, as lark-oapi can only read those): a tap's toast, an approval card and its decided
state, the matches of a `/forget`, a conflict between two notes, a capture waiting for a
"记住这个吗？" tap. Pure: text in, card out; each button carries its control's nonce."""

from __future__ import annotations

from typing import Any

from bridge.diffs import diff_markdown
from bridge.inputs import clip
from bridge.render import escape_card_markdown
from bridge.strings import Locale, both, t


def toast(key: str, locale: Locale, kind: str) -> dict[str, Any]:
    """A card action's toast: the tapper's language chosen by their client (`i18n`)."""
    return {"type": kind, "content": t(key, locale), "i18n": both(key)}


def approval_card(
    locale: Locale,
    tool: str,
    summary: str,
    minutes: int,
    nonce: str,
    diff: str | None = None,
    *,
    always: bool = False,
) -> dict[str, Any]:
    """Approve / deny buttons for one "ask" call (JSON 2.0: buttons straight in the elements,
    callback values are objects, as lark-oapi can only read those); `diff`: what an Edit or
    Write would change (bridge/diffs.py, capped), shown above the buttons; `always`: an
    "always allow here" button too."""

    def button(kind: str, label: str, style: str) -> dict[str, Any]:
        return {
            "tag": "button",
            "element_id": f"{kind}_btn",
            "type": style,
            "text": {"tag": "plain_text", "content": t(label, locale)},
            "behaviors": [{"type": "callback", "value": {"cm": kind, "n": nonce}}],
        }

    body = t(
        "approval_body", locale, tool=escape_card_markdown(tool), summary=summary, minutes=minutes
    )
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": t("approval_title", locale)},
            "template": "orange",
        },
        "body": {
            "elements": [
                {"tag": "markdown", "content": body},
                *(
                    [{"tag": "markdown", "content": escape_card_markdown(diff_markdown(diff))}]
                    if diff
                    else []
                ),
                button("approve", "approve_button", "primary"),
                *([button("always", "always_button", "default")] if always else []),
                button("deny", "deny_button", "danger"),
            ]
        },
    }


def button(label: str, style: str, value: dict[str, Any], element_id: str) -> dict[str, Any]:
    return {
        "tag": "button",
        "element_id": element_id,
        "type": style,
        "text": {"tag": "plain_text", "content": label},
        "behaviors": [{"type": "callback", "value": value}],
    }


def note_line(note: dict[str, Any], lang: Locale) -> str:
    """One note in a list, as markdown: title, id, the start of its summary (unescaped: the
    card or text it goes into escapes it, see bridge/render.py)."""
    title = clip(" ".join(str(note.get("title") or t("untitled", lang)).split()), 80)
    ident = str(note.get("id") or "")
    summary = " ".join(str(note.get("summary") or "").split())
    line = f"**{title}**" + (f" (`{ident}`)" if ident else "")
    if summary:
        line += f"\n   {clip(summary, 160)}"
    return line


def forget_card(lang: Locale, query: str, hits: list[dict[str, Any]], nonce: str) -> dict[str, Any]:
    """The matches of a `/forget` by query: one delete button per note, delete all, cancel."""
    notes = "\n".join(f"{i}. {note_line(h, lang)}" for i, h in enumerate(hits, start=1))
    buttons = [
        button(
            t("forget_one_button", lang, n=i + 1),
            "default",
            {"cm": "forget", "i": i, "n": nonce},
            f"forget_{i}",
        )
        for i in range(len(hits))
    ]
    buttons.append(
        button(
            t("forget_all_button", lang), "danger", {"cm": "forget_all", "n": nonce}, "forget_all"
        )
    )
    buttons.append(
        button(t("cancel_button", lang), "default", {"cm": "cancel", "n": nonce}, "cancel")
    )
    body = escape_card_markdown(t("forget_body", lang, query=query, notes=notes))
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": t("forget_title", lang)},
            "template": "red",
        },
        "body": {"elements": [{"tag": "markdown", "content": body}, *buttons]},
    }


def conflict_card(lang: Locale, new: str, old: str, nonce: str) -> dict[str, Any]:
    """A new note that contradicts an older one: both shown, three choices."""
    body = t(
        "conflict_body",
        lang,
        new=escape_card_markdown(clip(new, 400)),
        old=escape_card_markdown(clip(old, 400)),
    )
    buttons = [
        button(t(f"conflict_{c}", lang), style, {"cm": c, "n": nonce}, f"{c}_btn")
        for c, style in (("keep_new", "primary"), ("keep_old", "default"), ("keep_both", "default"))
    ]
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": t("conflict_title", lang)},
            "template": "orange",
        },
        "body": {"elements": [{"tag": "markdown", "content": body}, *buttons]},
    }


EDIT_MAX_CHARS = 1000  # an input holds at most 1,000 characters ("输入框", max_length)


def pending_card(lang: Locale, content: str, nonce: str) -> dict[str, Any]:
    """ "记住这个吗？": a low-confidence capture, kept, discarded or corrected in one tap."""
    body = t("pending_body", lang, content=escape_card_markdown(clip(content, 500)))
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": t("pending_title", lang)},
            "template": "blue",
        },
        "body": {
            "elements": [
                {"tag": "markdown", "content": body},
                button(t("keep_button", lang), "primary", {"cm": "keep", "n": nonce}, "keep_btn"),
                button(
                    t("discard_button", lang),
                    "default",
                    {"cm": "discard", "n": nonce},
                    "discard_btn",
                ),
                # Edit: the wording in an input, kept as corrected with one tap ("表单容器":
                # the input and its submit button need a `name`; the tap carries `form_value`).
                {
                    "tag": "form",
                    "name": "edit_form",
                    "elements": [
                        {
                            "tag": "input",
                            "name": "text",
                            "element_id": "edit_input",
                            "max_length": EDIT_MAX_CHARS,
                            "default_value": clip(content, EDIT_MAX_CHARS),
                            "placeholder": {
                                "tag": "plain_text",
                                "content": t("edit_placeholder", lang),
                            },
                        },
                        {
                            **button(
                                t("edit_button", lang),
                                "default",
                                {"cm": "edit", "n": nonce},
                                "edit_btn",
                            ),
                            "name": "edit_submit",
                            "form_action_type": "submit",
                        },
                    ],
                },
            ]
        },
    }


def decided_card(title: str, template: str, markdown: str) -> dict[str, Any]:
    """An approval card once decided: recoloured, its buttons gone."""
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {"title": {"tag": "plain_text", "content": title}, "template": template},
        "body": {"elements": [{"tag": "markdown", "content": markdown}]},
    }


def image_card(label: str, image_key: str) -> dict[str, Any]:
    """An image the agent made, shown in a card (JSON 2.0 `img`, its key from "上传图片")."""
    alt = clip(label, 100) or "image"
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "body": {
            "elements": [
                {"tag": "img", "img_key": image_key, "alt": {"tag": "plain_text", "content": alt}},
                {"tag": "markdown", "content": escape_card_markdown(alt), "text_size": "notation"},
            ]
        },
    }
