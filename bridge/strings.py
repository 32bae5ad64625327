"""Every user-facing string the bridge's newer features send, in one table: Chinese first,
English for users whose Feishu client runs in English.

The locale comes from the message event's `message.user_agent` (`… LarkLocale/en_US …`, needs
the `im:user_agent:read` scope; doc "接收消息", server-docs/im-v1/message/events/receive). The
contact API has no language field, so without that scope everyone reads Chinese.
"""

from __future__ import annotations

import re
from typing import Literal

Locale = Literal["zh", "en"]

_LARK_LOCALE = re.compile(r"LarkLocale/([A-Za-z]{2})[-_]?[A-Za-z]*")

STRINGS: dict[str, dict[Locale, str]] = {
    # --- queue ---
    "queued": {
        "zh": "已收到，前面还有 {ahead} 条消息，排在第 {position} 位。",
        "en": "Got it: {ahead} message(s) ahead of this one, it is number {position} in line.",
    },
    "queue_full": {
        "zh": "排队的消息已满（最多 {limit} 条），这条没有处理。请等当前回答结束后再发送。",
        "en": "The queue is full ({limit} messages at most), so this one was not taken. "
        "Send it again once the current answer is done.",
    },
    # --- streaming card ---
    "working": {"zh": "思考中…", "en": "Thinking…"},
    "stop_button": {"zh": "停止", "en": "Stop"},
    "steps_title": {"zh": "工具步骤：{count}", "en": "Tool steps: {count}"},
    "continued_below": {
        "zh": "（回答较长，后续内容见下方消息）",
        "en": "(a long answer: it continues in the messages below)",
    },
    "answer_below": {
        "zh": "回答见下方消息 ↓",
        "en": "The answer is in the message below ↓",
    },
    # --- card buttons: toasts ---
    "stopping": {"zh": "正在停止这个回答。", "en": "Stopping this answer."},
    "nothing_running": {"zh": "这个回答已经结束。", "en": "This answer has already ended."},
    "not_yours": {
        "zh": "这个按钮不属于当前会话，已忽略。",
        "en": "This button does not belong to this conversation; ignored.",
    },
    "busy_try_again": {
        "zh": "正在处理，请稍后再点一次。",
        "en": "Still working on it; tap again in a moment.",
    },
    # --- approvals ---
    "approval_title": {"zh": "需要批准", "en": "Approval needed"},
    "approval_body": {
        "zh": "助手想要使用 **{tool}**：\n{summary}\n\n{minutes} 分钟内无人批准则自动拒绝。",
        "en": "The assistant wants to use **{tool}**:\n{summary}\n\n"
        "Denied automatically if nobody approves within {minutes} min.",
    },
    "approve_button": {"zh": "批准", "en": "Approve"},
    "deny_button": {"zh": "拒绝", "en": "Deny"},
    "approved_title": {"zh": "已批准", "en": "Approved"},
    "denied_title": {"zh": "已拒绝", "en": "Denied"},
    "timed_out_title": {"zh": "已超时，自动拒绝", "en": "Timed out: denied"},
    "approved_by": {"zh": "**{tool}** 已由 {who} 批准。", "en": "**{tool}** approved by {who}."},
    "denied_by": {"zh": "**{tool}** 已被 {who} 拒绝。", "en": "**{tool}** denied by {who}."},
    "approval_timed_out": {
        "zh": "**{tool}** 在 {minutes} 分钟内无人批准，已拒绝。",
        "en": "Nobody approved **{tool}** within {minutes} min, so it was denied.",
    },
    "approve_refused": {
        "zh": "只有群主、群管理员或助手的主人可以批准或拒绝。",
        "en": "Only the group's owner or admins, or this assistant's owner, can approve or deny.",
    },
    "already_decided": {"zh": "已经处理过了。", "en": "Already decided."},
    "denied_reason_user": {
        "zh": "用户拒绝了这次 `{tool}` 调用；不要再试，换一种方式完成任务或询问用户。",
        "en": "The user denied this `{tool}` call; do not retry it, do the task another way "
        "or ask the user.",
    },
    "denied_reason_timeout": {
        "zh": "`{tool}` 需要用户批准，但在时限内无人批准；不要再试，换一种方式完成任务。",
        "en": "`{tool}` needed the user's approval and nobody gave it in time; do not retry "
        "it, do the task another way.",
    },
}


def locale_of(user_agent: str | None) -> Locale:
    """`en` when the Feishu client says it runs in English, else Chinese (the default)."""
    if user_agent:
        found = _LARK_LOCALE.search(user_agent)
        if found is not None and found.group(1).lower() == "en":
            return "en"
    return "zh"


def t(key: str, locale: Locale = "zh", **values: object) -> str:
    """The string `key` in `locale` (Chinese when that one is missing), with `values` filled."""
    entry = STRINGS[key]
    return (entry.get(locale) or entry["zh"]).format(**values)


def both(key: str, **values: object) -> dict[str, str]:
    """`key` in both languages, keyed as Feishu's card and toast `i18n` fields are."""
    return {"zh_cn": t(key, "zh", **values), "en_us": t(key, "en", **values)}
