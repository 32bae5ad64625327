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

The probe is tied to the encoder it was trained on: with any other encoder, or none (the hooks
working directly), `is_personal` answers None and the word rules of
`memory.loop.recall.own_world` decide.
"""

from __future__ import annotations

import json
import logging
import math
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from memory._record import record

if TYPE_CHECKING:
    from memory.backend import MemoryBackend

log = logging.getLogger(__name__)

PROBE_PATH: Final = Path(__file__).with_name("personal_probe.json")
THRESHOLD: Final = 0.5
"""The probability from which a prompt counts as about the person's world."""


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


def is_personal(store: MemoryBackend, prompt: str) -> bool | None:
    """Whether `prompt` is about the person's own world, by the probe over its query vector;
    None when the probe cannot say (another encoder, none, or no vector for the prompt)."""
    found = store.query_vector(prompt)  # first: without an encoder, numpy is never loaded
    if found is None:
        return None
    probe = packaged_probe()
    if probe is None or found.model != probe.encoder:
        return None
    return probe.probability(found.vector) >= THRESHOLD
