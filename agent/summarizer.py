"""Session summaries written by the model through a short one-shot SDK query."""

from __future__ import annotations

import asyncio
import logging

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage, TextBlock, query

from agent.options import agent_env, cli_to_run
from settings import Settings

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = """\
Summarize this session for the user's long-term memory in at most 300 characters, in the
language the user wrote in. Three parts: Done (what was accomplished), Decisions (key decisions
and why), Open (what is left). Reply with the summary only.

<session>
{transcript}
</session>"""


async def model_summary(
    settings: Settings, transcript: str, *, limit_seconds: float = 60
) -> str | None:
    """The model's summary, or None if the model is unavailable (the caller falls back)."""
    options = ClaudeAgentOptions(
        cwd=str(settings.workspace_dir),
        tools=[],
        setting_sources=[],
        max_turns=1,
        system_prompt="You write short, factual session summaries.",
        model=settings.anthropic_model,
        cli_path=cli_to_run(settings),
        env=agent_env(settings),
    )
    texts: list[str] = []
    failed = False
    try:
        async with asyncio.timeout(limit_seconds):
            async for message in query(
                prompt=SUMMARY_PROMPT.format(transcript=transcript), options=options
            ):
                if isinstance(message, AssistantMessage):
                    if message.error is not None:
                        failed = True
                    texts.extend(b.text for b in message.content if isinstance(b, TextBlock))
                elif isinstance(message, ResultMessage) and message.is_error:
                    failed = True
    except Exception:
        logger.warning("model summary failed; using the rule-based summary", exc_info=True)
        return None
    text = " ".join(" ".join(texts).split())
    return None if failed or not text else text
