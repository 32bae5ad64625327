"""Every user-facing string the bridge sends, in one table: Chinese first, English for users
whose Feishu client runs in English.

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
    # --- help ---
    "help": {
        "zh": "**命令**\n"
        "- `/clear` 或 `/new`：开始新的对话（旧对话结束并生成摘要）\n"
        "- `/sessions`：这个聊天之前的对话；`/resume <编号>` 回到其中一个\n"
        "- `/model [名称|default]`：查看或切换这个对话使用的模型\n"
        "- `/compact`：压缩当前会话，减少上下文占用\n"
        "- `/stop`：停止正在进行的回答\n"
        "- `/status`：对话、会话、轮数、费用、运行状态\n"
        "- `/remember <内容>`：记住一条笔记（在群里也只用于你自己的对话）\n"
        "- `/team-remember <内容>`：存入本群的团队记忆，全群成员的对话都会用到"
        "（群主、群管理员或助手的主人）\n"
        "- `/recall <查询>`（或 `/memory`）：搜索长期记忆\n"
        "- `/forget <笔记 id 或查询>`：删除你自己的笔记（按查询时先确认）\n"
        "- `/approvers [add|remove @成员]`：查看或设置这个群里谁可以批准工具调用"
        "（助手的主人设置）\n"
        "- `/allowed`：这里“总是允许”的调用；`/revoke <编号>` 撤销其中一条\n"
        "- `/help`：显示这个列表\n\n"
        "其他消息都会交给助手。在群聊中请 @ 机器人。",
        "en": "**Commands**\n"
        "- `/clear` or `/new`: start a fresh conversation (the old one is closed and summarised)\n"
        "- `/sessions`: this chat's earlier conversations; `/resume <n>` goes back to one\n"
        "- `/model [name|default]`: show or change this conversation's model\n"
        "- `/compact`: compact the current session so it uses less context\n"
        "- `/stop`: stop the answer that is running\n"
        "- `/status`: conversation, session, turns, cost, running or idle\n"
        "- `/remember <text>`: save a note (in a group too, for your own conversations only)\n"
        "- `/team-remember <text>`: save to this group's team memory, used in every member's "
        "conversations (the group's owner or admins, or the assistant's owner)\n"
        "- `/recall <query>` (or `/memory`): search the long-term memory\n"
        "- `/forget <note id or query>`: delete a note of yours (a query asks first)\n"
        "- `/approvers [add|remove @member]`: who approves tool calls in this group (set by the "
        "assistant's owner)\n"
        "- `/allowed`: the calls always allowed here; `/revoke <n>` drops one\n"
        "- `/help`: this list\n\n"
        "Anything else goes to the agent. In group chats, @-mention the bot.",
    },
    "unknown_command": {
        "zh": "没有 /{name} 这个命令。发送 /help 查看命令列表。",
        "en": "Unknown command /{name}. Send /help for the list.",
    },
    # --- access and pairing ---
    "refusal": {
        "zh": "抱歉，这是一个私人助手，只回复它的主人。",
        "en": "Sorry, this is a personal assistant and it only answers its owner.",
    },
    "unpaired": {
        "zh": "这个机器人还没有配对。主人请在这里发送 `/pair <配对码>`；配对码在桥接启动时打印在"
        "服务器日志里。",
        "en": "This bot is not paired yet. Its owner sends `/pair <code>` here; the code is "
        "printed in the server log when the bridge starts.",
    },
    "pair_off": {
        "zh": "配对已关闭：访问权限由 FEISHU_ALLOWED_USERS / FEISHU_ALLOWED_CHATS 决定。",
        "en": "Pairing is off: access is set by FEISHU_ALLOWED_USERS / FEISHU_ALLOWED_CHATS.",
    },
    "pair_already": {"zh": "你已经是主人了。", "en": "You are already the owner."},
    "pair_usage": {
        "zh": "请发送 `/pair <配对码>`，配对码打印在服务器日志里。",
        "en": "Send `/pair <code>` with the code printed in the server log.",
    },
    "pair_wrong": {
        "zh": "配对码不对。配对码打印在服务器日志里。",
        "en": "That code is not right. The pairing code is printed in the server log.",
    },
    "paired": {
        "zh": "配对成功：你现在是这个助手的主人。打个招呼吧！",
        "en": "Paired: you are now the owner of this assistant. Say hello!",
    },
    # --- notices ---
    "route_failed": {
        "zh": "开始处理之前出了问题，请再发送一次。",
        "en": "Something went wrong before I could start; please send it again.",
    },
    "stale": {
        "zh": "这条消息是在我离线时发送的，所以没有处理。如果仍然需要，请再发送一次。",
        "en": "This message was sent while I was offline, so I did not run it. "
        "Send it again if it still matters.",
    },
    "unsupported": {
        "zh": "我能读取文字、富文本、图片、文件、转发的聊天记录和引用的消息；这条 {kind} 消息"
        "没有交给助手。",
        "en": "I can read text, rich text, images, files, forwarded chats and quoted messages; "
        "this {kind} message was not passed to the agent.",
    },
    "audio": {
        "zh": "暂时听不懂语音消息（还不支持转写）。请把内容打成文字发给我。",
        "en": "I cannot listen to voice messages yet (no transcription). Please type it.",
    },
    "sticker": {"zh": "收到表情 🙂", "en": "Got your sticker 🙂"},
    "empty": {
        "zh": "这条消息好像是空的；请在 @ 之后写下你的问题。",
        "en": "That message looks empty; write your question after the @-mention.",
    },
    "restart_queued": {
        "zh": "服务器在处理到这条消息之前重启了，请再发送一次。",
        "en": "The server restarted before I got to this message; please send it again.",
    },
    "restart_notice": {
        "zh": "回答这条消息时应用重启了，回答被中断。请再发送一次。",
        "en": "The app restarted while I was answering this message, so the answer was "
        "interrupted. Please send it again.",
    },
    "restart_title": {"zh": "因重启中断", "en": "Interrupted by a restart"},
    "files_refused": {
        "zh": "这些文件没有发送：\n{lines}",
        "en": "These files were not sent:\n{lines}",
    },
    "file_outside": {"zh": "不在工作区内", "en": "it is outside the workspace"},
    "file_not_a_file": {"zh": "不是普通文件", "en": "it is not a regular file"},
    "file_empty": {"zh": "是空文件", "en": "it is empty"},
    "file_too_large": {"zh": "超过 30 MB", "en": "it is over 30 MB"},
    "file_upload_failed": {"zh": "上传失败（{error}）", "en": "the upload failed ({error})"},
    "restart_nothing_yet": {
        "zh": "（应用重启时，回答还没有写出内容。）",
        "en": "(The app restarted before the answer had any text.)",
    },
    "approval_restart": {
        "zh": "应用重启了，这一轮已结束，**{tool}** 的批准请求已关闭，未执行。",
        "en": "The app restarted and the turn ended, so the approval request for **{tool}** is "
        "closed; it did not run.",
    },
    "recalled_card": {
        "zh": "你撤回了这条消息，所以我停止了，没有回答。",
        "en": "You recalled this message, so I stopped and did not answer it.",
    },
    "ready_push": {"zh": "✅ 答案已完成 ↑", "en": "✅ The answer is ready above ↑"},
    # --- turns ---
    "progress_title": {"zh": "处理中…", "en": "Working…"},
    "stopped_title": {"zh": "已停止", "en": "Stopped"},
    "working_seconds": {"zh": "⏳ 处理中… {seconds} 秒", "en": "⏳ working… {seconds} s"},
    "earlier_steps": {"zh": "… 之前还有 {count} 步", "en": "… {count} earlier steps"},
    "retrying": {
        "zh": "🔁 重试中（{attempt}/{limit}），{seconds} 秒后：{reason}",
        "en": "🔁 retrying ({attempt}/{limit}) in {seconds} s: {reason}",
    },
    "writing": {"zh": "✍️ 正在写回答…", "en": "✍️ writing the answer…"},
    "trace_title": {"zh": "工具步骤：{count}", "en": "Tool steps: {count}"},
    "trace_refused_count": {"zh": " · {count} 个被拒绝", "en": " · {count} refused"},
    "trace_failed_count": {"zh": " · {count} 个失败", "en": " · {count} failed"},
    "trace_refused": {"zh": " — 被拒绝", "en": " — refused"},
    "trace_failed": {"zh": " — 失败", "en": " — failed"},
    "error_title": {"zh": "出错了", "en": "Error"},
    "answer_in_messages_below": {
        "zh": "回答见下方消息。",
        "en": "The answer is in the messages below.",
    },
    "shutting_down": {
        "zh": "已停止：服务器正在关闭。请稍后再发送一次。",
        "en": "Stopped: the server is shutting down. Send the message again in a moment.",
    },
    "internal_error": {
        "zh": "执行失败：桥接遇到内部错误，详见服务器日志。",
        "en": "Execution failed: the bridge hit an internal error; see the server log.",
    },
    "execution_failed": {"zh": "执行失败：{error}", "en": "Execution failed: {error}"},
    "execution_crashed": {
        "zh": "执行失败：{error}。详见服务器日志。",
        "en": "Execution failed: {error}. See the server log.",
    },
    # --- conversation commands ---
    "cleared": {
        "zh": "已开始新的对话（v{generation}）；下一条消息会开启新的会话。",
        "en": "Started a fresh conversation (v{generation}); the next message begins a new "
        "session.",
    },
    "stop_done": {"zh": "正在停止当前的回答。", "en": "Stopping the running answer."},
    "stop_idle": {"zh": "现在没有正在进行的回答。", "en": "Nothing is running."},
    "compacting": {"zh": "正在压缩…", "en": "Compacting…"},
    "compact_failed": {"zh": "压缩失败：{error}", "en": "Compaction failed: {error}"},
    "status": {
        "zh": "**状态**\n- 对话：`{conversation}`\n- 会话：{session}\n- 轮数：{turns}\n"
        "- 已花费：${cost}\n- 模型：{model}\n- 当前：{state}\n- 连接：{connection}，"
        "重连 {reconnects} 次",
        "en": "**Status**\n- conversation: `{conversation}`\n- session: {session}\n"
        "- turns: {turns}\n- cost so far: ${cost}\n- model: {model}\n- now: {state}\n"
        "- connection: {connection}, {reconnects} reconnects",
    },
    "session_none": {"zh": "尚未开始", "en": "not started"},
    "running": {"zh": "运行中", "en": "running"},
    "idle": {"zh": "空闲", "en": "idle"},
    "queued_count": {"zh": "，{count} 条排队", "en": ", {count} queued"},
    "connected": {"zh": "已连接", "en": "connected"},
    "disconnected": {"zh": "未连接", "en": "disconnected"},
    "model_default": {"zh": "默认（{name}）", "en": "default ({name})"},
    "model_cli_default": {"zh": "Claude Code 的默认模型", "en": "Claude Code's default"},
    "model_now": {
        "zh": "这个对话使用的模型：{model}。用 `/model <名称>` 切换，`/model default` 恢复默认。",
        "en": "This conversation's model: {model}. `/model <name>` changes it, "
        "`/model default` goes back.",
    },
    "model_set": {
        "zh": "好的，从下一条消息起使用 **{model}**。",
        "en": "OK: from the next message on, **{model}** answers.",
    },
    "model_reset": {
        "zh": "好的，从下一条消息起使用默认模型（{model}）。",
        "en": "OK: from the next message on, the default model ({model}) answers.",
    },
    "model_bad": {
        "zh": "模型名称只能包含字母、数字和 `-._:[]`，最长 80 个字符。",
        "en": "A model name has letters, digits and `-._:[]` only, at most 80 characters.",
    },
    "sessions_title": {"zh": "**这个聊天的对话**", "en": "**This chat's conversations**"},
    "sessions_line": {
        "zh": "{n}. {date} · {turns} 轮 · {title}{current}",
        "en": "{n}. {date} · {turns} turns · {title}{current}",
    },
    "sessions_current": {"zh": " ← 当前", "en": " ← current"},
    "sessions_empty_title": {"zh": "（还没有消息）", "en": "(no messages yet)"},
    "sessions_hint": {
        "zh": "发送 `/resume <编号>` 回到其中一个对话。",
        "en": "Send `/resume <n>` to go back to one of them.",
    },
    "resume_usage": {
        "zh": "用法：`/resume <编号>`，编号见 `/sessions`。",
        "en": "Usage: `/resume <n>`, with a number from `/sessions`.",
    },
    "resume_unknown": {
        "zh": "这个聊天没有第 {n} 个对话。发送 `/sessions` 查看列表。",
        "en": "This chat has no conversation {n}. Send `/sessions` for the list.",
    },
    "resumed": {
        "zh": "已回到对话 {n}（{title}）；下一条消息会接着它继续。",
        "en": "Back in conversation {n} ({title}); the next message continues it.",
    },
    "already_current": {
        "zh": "对话 {n} 就是当前的对话。",
        "en": "Conversation {n} is the current one.",
    },
    # --- who may (groups; bridge/rights.py) ---
    "stop_refused": {
        "zh": "只有提问的人、群主或群管理员、或者这个助手的主人可以停止这个回答。",
        "en": "Only the person who asked, the group's owner or admins, or this assistant's owner "
        "can stop this answer.",
    },
    "clear_refused": {
        "zh": "只有群主或群管理员、或者这个助手的主人可以清空这个群的对话。",
        "en": "Only the group's owner or admins, or this assistant's owner, can clear this "
        "group's conversation.",
    },
    "compact_refused": {
        "zh": "只有群主或群管理员、或者这个助手的主人可以压缩这个群的对话。",
        "en": "Only the group's owner or admins, or this assistant's owner, can compact this "
        "group's conversation.",
    },
    "resume_refused": {
        "zh": "只有群主或群管理员、或者这个助手的主人可以切换这个群的对话。",
        "en": "Only the group's owner or admins, or this assistant's owner, can resume another "
        "conversation here.",
    },
    "model_refused": {
        "zh": "只有群主或群管理员、或者这个助手的主人可以更换这个群对话的模型。",
        "en": "Only the group's owner or admins, or this assistant's owner, can change this "
        "group conversation's model.",
    },
    "forget_refused": {
        "zh": "只有发出这个 /forget 的人可以删除这些笔记。",
        "en": "Only the person who sent this /forget can delete these notes.",
    },
    "team_refused": {
        "zh": "只有群主或群管理员、或者这个助手的主人可以保存本群的团队记忆。"
        "想让助手只为你记住，请用 `/remember <内容>`。",
        "en": "Only the group's owner or admins, or this assistant's owner, can save to this "
        "group's team memory. To have it remembered for you alone, send `/remember <text>`.",
    },
    "team_only_in_groups": {
        "zh": "团队记忆属于一个群：请在群里发送 `/team-remember <内容>`。",
        "en": "A team memory belongs to a group: send `/team-remember <text>` in the group.",
    },
    "keep_refused": {
        "zh": "只有说这句话的人、群主或群管理员、或者这个助手的主人可以决定。",
        "en": "Only the person who said it, the group's owner or admins, or this assistant's "
        "owner can decide.",
    },
    # --- memory in the chat ---
    "remember_usage": {
        "zh": "用法：`/remember <内容>`，例如 `/remember 我下周三去上海出差`。",
        "en": "Usage: `/remember <text>`, for example `/remember I fly to Shanghai next "
        "Wednesday`.",
    },
    "remembered": {"zh": "记住了（`{id}`）。", "en": "Remembered (`{id}`)."},
    "remembered_for_you": {
        "zh": "记住了（`{id}`），只用于你自己的对话。想让全群都用上，请群主或管理员发送 "
        "`/team-remember <内容>`。",
        "en": "Remembered (`{id}`), for your own conversations only. For the whole group, the "
        "group's owner or an admin sends `/team-remember <text>`.",
    },
    "team_remember_usage": {
        "zh": "用法：`/team-remember <内容>`，例如 `/team-remember 周报每周五下午五点前交`。"
        "本群每位成员的对话都会用到它。",
        "en": "Usage: `/team-remember <text>`, for example `/team-remember Weekly reports are "
        "due Friday 5 pm`. Every member's conversations in this group use it.",
    },
    "team_remembered_title": {
        "zh": "已存入本群的团队记忆",
        "en": "Saved to this group's team memory",
    },
    "team_remembered": {
        "zh": "{content}\n\n（`{id}`，{who} 保存）本群每位成员的对话都会用到它；"
        "删除：`/forget {id}`。",
        "en": "{content}\n\n(`{id}`, saved by {who}) Every member's conversations in this group "
        "use it; to delete it: `/forget {id}`.",
    },
    "team_known_title": {"zh": "团队记忆里已经有这条", "en": "The team memory already has this"},
    "remembered_known": {
        "zh": "这个我已经知道了（`{id}`）。",
        "en": "I already knew that (`{id}`).",
    },
    "memory_unavailable": {
        "zh": "记忆暂时不可用。",
        "en": "The memory is not available right now.",
    },
    "memory_failed": {"zh": "记忆操作失败：{error}", "en": "The memory failed: {error}"},
    "recall_usage": {
        "zh": "用法：`/recall <查询>`，例如 `/recall 项目截止日期`。",
        "en": "Usage: `/recall <query>`, for example `/recall project deadlines`.",
    },
    "recall_none": {"zh": "没有与“{query}”相关的记忆。", "en": "No memories match “{query}”."},
    "recall_title": {"zh": "**与“{query}”相关的记忆**", "en": "**Memories for “{query}”**"},
    "untitled": {"zh": "（无标题）", "en": "(untitled)"},
    "forget_usage": {
        "zh": "用法：`/forget <笔记 id 或查询>`。",
        "en": "Usage: `/forget <note id or query>`.",
    },
    "forgotten": {"zh": "已删除笔记 `{id}`（{title}）。", "en": "Deleted note `{id}` ({title})."},
    "forget_none": {
        "zh": "没有找到与“{query}”相关的笔记，什么也没删除。",
        "en": "No note matches “{query}”; nothing was deleted.",
    },
    "forget_title": {"zh": "删除这些记忆吗？", "en": "Delete these memories?"},
    "forget_body": {
        "zh": "与“{query}”相关的笔记：\n{notes}\n\n点一下删除一条，或全部删除。",
        "en": "Notes matching “{query}”:\n{notes}\n\nTap one to delete it, or delete all.",
    },
    "forget_one_button": {"zh": "删除 {n}", "en": "Delete {n}"},
    "forget_all_button": {"zh": "全部删除", "en": "Delete all"},
    "cancel_button": {"zh": "取消", "en": "Cancel"},
    "forget_done_title": {"zh": "已删除", "en": "Deleted"},
    "forget_done": {"zh": "已删除：\n{notes}", "en": "Deleted:\n{notes}"},
    "forget_cancelled": {"zh": "已取消，没有删除任何笔记。", "en": "Cancelled: nothing deleted."},
    "cancelled_title": {"zh": "已取消", "en": "Cancelled"},
    "pending_title": {"zh": "记住这个吗？", "en": "Remember this?"},
    "pending_body": {
        "zh": "{content}\n\n（想改写的话，发送 `/remember <改写后的内容>`，再点“不要”。）",
        "en": "{content}\n\n(To reword it, send `/remember <your wording>` and tap Discard.)",
    },
    "keep_button": {"zh": "记住", "en": "Keep"},
    "discard_button": {"zh": "不要", "en": "Discard"},
    "edit_placeholder": {"zh": "改一改再记住", "en": "Edit it, then keep"},
    "edit_button": {"zh": "改后记住", "en": "Keep as edited"},
    "edit_empty": {"zh": "改后的内容是空的。", "en": "The edited text is empty."},
    "conflict_title": {"zh": "和已有的记忆不一致", "en": "This contradicts a memory"},
    "conflict_body": {
        "zh": "**新的**：{new}\n\n**已有的**：{old}\n\n两条都先留着，选一个吧：",
        "en": "**New**: {new}\n\n**Already known**: {old}\n\nBoth are kept until you choose:",
    },
    "conflict_keep_new": {"zh": "用新的", "en": "Keep new"},
    "conflict_keep_old": {"zh": "用旧的", "en": "Keep old"},
    "conflict_keep_both": {"zh": "都保留", "en": "Keep both"},
    "conflict_decided": {
        "zh": "已处理；两条笔记的历史都记下了这次选择。",
        "en": "Done; both notes' histories record the choice.",
    },
    "kept_title": {"zh": "已记住", "en": "Kept"},
    "kept": {"zh": "{content}\n\n已记住（`{id}`）。", "en": "{content}\n\nKept (`{id}`)."},
    "discarded_title": {"zh": "已放弃", "en": "Discarded"},
    "discarded": {"zh": "{content}\n\n不会记住。", "en": "{content}\n\nNot remembered."},
    "already_decided_as": {
        "zh": "已经决定过了（{status}）。",
        "en": "Already decided ({status}).",
    },
    # --- richer input ---
    "quoted": {"zh": "[引用的消息（{who}）：\n{text}]", "en": "[Quoted message ({who}):\n{text}]"},
    "quoted_card": {
        "zh": "[引用了一张机器人卡片，它的内容无法读取]",
        "en": "[Quoted a bot card, whose content cannot be read back]",
    },
    "quoted_unreadable": {
        "zh": "[引用的消息无法读取：{why}]",
        "en": "[The quoted message could not be read: {why}]",
    },
    "forwarded": {
        "zh": "[转发的聊天记录，{count} 条消息：\n{lines}]",
        "en": "[Forwarded chat, {count} messages:\n{lines}]",
    },
    "forwarded_more": {
        "zh": "……还有 {count} 条没有展开",
        "en": "… {count} more not shown",
    },
    "forwarded_unreadable": {
        "zh": "[转发的聊天记录无法读取：{why}]",
        "en": "[The forwarded chat could not be read: {why}]",
    },
    "the_bot": {"zh": "机器人", "en": "the bot"},
    # --- queue ---
    "queued": {
        "zh": "已收到，前面还有 {ahead} 条消息，排在第 {position} 位。",
        "en": "Got it: {ahead} message(s) ahead of this one, it is number {position} in line.",
    },
    "slots_full": {
        "zh": "排队中，前面还有 {ahead} 个。同时进行的对话已满（{limit} 个），轮到你时会自动开始。",
        "en": "Queued: {ahead} ahead of you. {limit} conversations are running at once, the "
        "most there can be; yours starts by itself when its turn comes.",
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
    "part_of": {"zh": "第 {index}/{total} 部分", "en": "part {index}/{total}"},
    "continued_below": {
        "zh": "（回答较长，后续内容见下方消息）",
        "en": "(a long answer: it continues in the messages below)",
    },
    "answer_below": {
        "zh": "回答见下方消息 ↓",
        "en": "The answer is in the message below ↓",
    },
    "stream_cut": {
        "zh": "⚠️ 这张卡片的更新在这里中断了，完整回答见下方的新消息 ↓",
        "en": "⚠️ This card stopped updating here; the whole answer is in the new message below ↓",
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
    "always_button": {"zh": "总是允许（在这里）", "en": "Always allow here"},
    "always_by": {
        "zh": "{who} 批准了 **{tool}**，这里以后同样的调用都会直接允许"
        "（`/allowed` 查看，`/revoke` 撤销）。",
        "en": "{who} approved **{tool}**; the same call is always allowed here from now on "
        "(`/allowed` lists, `/revoke` drops).",
    },
    "approvers_refused": {
        "zh": "只有助手的主人可以设置批准人。",
        "en": "Only the assistant's owner sets who approves.",
    },
    "approvers_list": {
        "zh": "这个群的批准人（除助手的主人、群主和群管理员外）：{names}",
        "en": "Approvers in this group (besides the assistant's owners, the group's owner and "
        "admins): {names}",
    },
    "approvers_none": {"zh": "（还没有）", "en": "(none yet)"},
    "approvers_usage": {
        "zh": "用法：`/approvers add @成员` 或 `/approvers remove @成员`（@ 要设置的人）。",
        "en": "Usage: `/approvers add @member` or `/approvers remove @member` (mention them).",
    },
    "approvers_changed": {"zh": "已更新。{list}", "en": "Updated. {list}"},
    "allowed_list": {
        "zh": "这里总是允许的调用：\n{rules}\n\n发送 `/revoke <编号>` 撤销。",
        "en": "Always allowed here:\n{rules}\n\nSend `/revoke <n>` to drop one.",
    },
    "allowed_none": {
        "zh": "这里还没有总是允许的调用。",
        "en": "Nothing is always allowed here yet.",
    },
    "revoked": {"zh": "已撤销：{rule}", "en": "Dropped: {rule}"},
    "revoke_unknown": {
        "zh": "没有这个编号。发送 `/allowed` 查看。",
        "en": "No such number. Send `/allowed` for the list.",
    },
    "deny_button": {"zh": "拒绝", "en": "Deny"},
    "approved_title": {"zh": "已批准", "en": "Approved"},
    "denied_title": {"zh": "已拒绝", "en": "Denied"},
    "timed_out_title": {"zh": "已超时，自动拒绝", "en": "Timed out: denied"},
    "approved_by": {"zh": "**{tool}** 已由 {who} 批准。", "en": "**{tool}** approved by {who}."},
    "denied_by": {"zh": "**{tool}** 已被 {who} 拒绝。", "en": "**{tool}** denied by {who}."},
    "approval_turn_ended": {
        "zh": "这一轮已结束，**{tool}** 的批准请求已关闭，未执行。",
        "en": "The turn ended, so the approval request for **{tool}** is closed; it did not run.",
    },
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
