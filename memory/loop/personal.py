"""Whether a prompt is about the person's own world, from its vector (docs/retrieval.md, "Small
talk stays out").

A note goes into a prompt nobody asked to search only when the prompt is about the person's
world: their people, projects, things and past. Words cannot tell this apart. "How do I write a
table-driven test in Go?" is in the first person and names Go; "Which senior leader names our
projects after landmarks?" names nothing; on the life set a rule on first person and names let
a note into 33 % of the general prompts and kept the right one out of 53 % of the personal ones
(issue #29). The prompt's vector can tell: a logistic regression over the default encoder's
query vector (the vector every search of the prompt computes anyway, taken from the store's
cache), trained by `bench/train_personal_probe.py` on labelled prompts of both languages and
shipped in `personal_probe.json`. It passes 3-15 % of held-out general prompts and 83-91 % of
held-out personal ones.

The probe is tied to the encoder it was trained on. With any other encoder, or none (the hooks
working directly, keyword search only), a second probe reads the prompt's words instead: the same
regression over hashed words, word pairs and Chinese character pairs (`text_features`), shipped
in `personal_text_probe.json` and calibrated so that its operating point is the same 0.5. It is
weaker (held out: 3-9 % of general prompts pass, 69-80 % of personal ones) but costs a hook
process no import beyond the standard library. Without either file the word rules of
`memory.loop.recall.own_world` decide.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import unicodedata
import zlib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from memory._record import record

if TYPE_CHECKING:
    from memory.backend import MemoryBackend

log = logging.getLogger(__name__)

PROBE_PATH: Final = Path(__file__).with_name("personal_probe.json")
TEXT_PROBE_PATH: Final = Path(__file__).with_name("personal_text_probe.json")
TEXT_DIMENSIONS: Final = 1 << 15
"""Buckets the text probe hashes its features into (collisions are rare at a few thousand
features and cost only a little noise)."""
_WORD_OR_HAN_RE: Final = re.compile(r"[a-z0-9']+|[\u4e00-\u9fff]")
THRESHOLD: Final = 0.5
"""The probability from which a prompt counts as about the person's world."""
PROJECT_THRESHOLD: Final = 0.4
"""...and from which a note of the session's own project may come in (Claude Code, Codex): a
session's prompts are mostly its work ("把 channel timeout 改成 800ms" 0.58, "fix the failing
TestRefundConcurrent test" 0.62), while a question of general knowledge asked there stays low
("How do I read a pprof flame graph?" 0.30, "今天天气怎么样？" 0.10). On the life set, letting the
project's notes in at any probability put one into 21 % (tune) and 14 % (held-out) of the
unrelated prompts; from 0.4, 3 % and 7 %, with the related prompts' gold unchanged."""
TEXT_PROJECT_THRESHOLD: Final = 0.2
"""The same for the text probe, which reads work as less personal ("把 channel timeout 改成
800ms" 0.24, "How do I read a pprof flame graph?" 0.03): on the life set's direct hooks, from 0.2
the project's notes reached 0 % (tune) and 2 % (held-out) of the unrelated prompts, against 15 %
and 5 % letting them all in, with the related prompts' gold unchanged."""
TEXT_BEYOND_PROJECT_THRESHOLD: Final = 0.3
"""...and from which the text probe lets a note from outside the project into a project
session (the person's own notes, another project's): a coding request reads low to the words
("please check the webhook signatures" 0.35, "how is the login rate limit configured?" ~0.3), a
question of general knowledge lower. On the life set's direct hooks, from 0.3 no tune and 3 %
of the held-out unrelated prompts got a note (from 0.25: 9 %), the related prompts' gold as
from 0.5."""


@record
class Probe:
    encoder: str
    """The encoder (its full name, centering included) whose vectors the weights read."""
    weights: Any
    bias: float

    def probability(self, vector: Any) -> float:
        """P(the prompt is about the person's world) for the prompt's query vector."""
        import numpy as np

        v = np.asarray(vector, dtype=np.float64)
        norm = float(np.linalg.norm(v))
        if v.shape != self.weights.shape or norm == 0.0:
            return 0.0
        z = float(v @ self.weights) / norm + self.bias
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


@cache
def packaged_probe() -> Probe | None:
    """The probe shipped with the package (read once); None when it is missing or unreadable,
    so the word rules decide."""
    try:
        data = json.loads(PROBE_PATH.read_text(encoding="utf-8"))
        import numpy as np

        return Probe(str(data["encoder"]), np.asarray(data["weights"]), float(data["bias"]))
    except (OSError, ValueError, KeyError, TypeError, ImportError):
        log.warning("the personal-prompt probe %s could not be read; word rules only", PROBE_PATH)
        return None


def text_features(text: str) -> dict[int, float]:
    """The text probe's input: hashed words, word pairs and Chinese character pairs of `text`,
    counted and scaled to unit length (one function for training and use)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = _WORD_OR_HAN_RE.findall(folded)
    han = "".join(w for w in words if len(w) == 1 and "\u4e00" <= w <= "\u9fff")
    names = [f"w:{w}" for w in words]
    names += [f"b:{a} {b}" for a, b in itertools.pairwise(words)]
    names += [f"h:{han[i : i + 2]}" for i in range(len(han) - 1)]
    counts: dict[int, float] = {}
    for name in names:
        bucket = zlib.crc32(name.encode()) % TEXT_DIMENSIONS
        counts[bucket] = counts.get(bucket, 0.0) + 1.0
    norm = math.sqrt(sum(c * c for c in counts.values()))
    return {k: c / norm for k, c in counts.items()} if norm else {}


@record
class Reading:
    """What the probes read of a prompt: whether it is about the person's world (any note may
    come in with it), and whether it reads as the work of a project session (that project's own
    notes may)."""

    personal: bool
    work: bool
    beyond_project: bool | None = None
    """In a project session, whether notes from outside the project may come in (None: as
    `personal`)."""
    by_meaning: bool = True
    """Read from the prompt's vector (False: from its words alone, the weaker text probe)."""

    def lets_in(self, *, own_project: bool, in_project: bool = False) -> bool:
        if own_project:
            return self.work
        if in_project and self.beyond_project is not None:
            return self.beyond_project
        return self.personal


@record
class TextProbe:
    weights: Mapping[int, float]
    """Hashed feature -> weight (features never seen in training weigh nothing)."""
    bias: float

    def probability(self, text: str) -> float:
        """P(the prompt is about the person's world) from its words."""
        z = self.bias + sum(self.weights.get(k, 0.0) * v for k, v in text_features(text).items())
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


@cache
def packaged_text_probe() -> TextProbe | None:
    """The text probe shipped with the package (read once); None when missing or unreadable."""
    try:
        data = json.loads(TEXT_PROBE_PATH.read_text(encoding="utf-8"))
        weights = {int(k): float(w) for k, w in data["weights"].items()}
        return TextProbe(weights, float(data["bias"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        log.warning("the text probe %s could not be read; word rules only", TEXT_PROBE_PATH)
        return None


def is_personal(store: MemoryBackend, prompt: str) -> bool | None:
    """Whether `prompt` is about the person's own world, by the probe over its query vector;
    None when the probe cannot say (another encoder, none, or no vector for the prompt)."""
    reading = read_prompt(store, prompt)
    return None if reading is None else reading.personal


def read_prompt(store: MemoryBackend, prompt: str) -> Reading | None:
    """Whether `prompt` is about the person's own world, and whether it reads as a project's
    work; None when no probe can tell.

    With the encoder the vector probe was trained on, both probes read the prompt and the mean
    of their log-odds decides whether it is personal (meaning and words are two witnesses: on the
    life set's held-out third the vector probe alone let a note into 10 % of the unrelated
    prompts through the chat, both together 5 %, for 4 % fewer related prompts given their
    note); whether it is work is the vector probe's alone (the text probe reads work as less
    personal). Otherwise the text probe decides both, at its own bars."""
    text_probe = packaged_text_probe()
    found = store.query_vector(prompt)  # first: without an encoder, numpy is never loaded
    if found is not None:
        probe = packaged_probe()
        if probe is not None and found.model == probe.encoder:
            meaning = probe.probability(found.vector)
            if text_probe is None:
                return Reading(meaning >= THRESHOLD, meaning >= PROJECT_THRESHOLD)
            words = text_probe.probability(prompt)
            return Reading(
                _log_odds(meaning) + _log_odds(words) >= 0.0, meaning >= PROJECT_THRESHOLD
            )
    if text_probe is None:
        return None
    words = text_probe.probability(prompt)
    return Reading(
        words >= THRESHOLD,
        words >= TEXT_PROJECT_THRESHOLD,
        beyond_project=words >= TEXT_BEYOND_PROJECT_THRESHOLD,
        by_meaning=False,
    )


def _log_odds(probability: float) -> float:
    clipped = min(max(probability, 1e-9), 1.0 - 1e-9)
    return math.log(clipped / (1.0 - clipped))
