"""Long prompts: does a search still find the note a question is about when the question comes
with sentences about something else? (The query vector holds only about `VECTOR_TOKENS` of a
long prompt, `memory.search.plan.vector_text`.)

    uv run python bench/long_prompts.py                       # the product's vector_text
    uv run python bench/long_prompts.py --compare 0.667:40    # and (head share : tokens)

The life set's notes are saved as bench/retrieval_eval.py saves them (its cached embeddings
included); each of its 349 questions is then asked twice, made long by 2-4 sentences of the
served bench's unrelated work chatter (bench/served_latency.py), once before the question and
once after it. The line per variant: the share of questions whose gold note is in the top 5
of `search` (the product's defaults), for the question last and the question first.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import retrieval_eval as life  # noqa: E402
from served_latency import EN_SENTENCES, ZH_SENTENCES, UniqueTexts  # noqa: E402

import memory.search.plan as plan  # noqa: E402
from memory.encoders.models import cjk_share, load_encoder, parse_encoder_setting  # noqa: E402


def split_text(head_share: float, tokens: float) -> Callable[[str], str]:
    """`vector_text` with another split and length (for comparison only)."""
    return functools.partial(plan.vector_text, tokens=tokens, head_share=head_share)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", action="append", default=[], help="head share:tokens")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    data = json.loads(life.LIFE.read_text(encoding="utf-8"))
    spec = parse_encoder_setting("auto")
    if spec is None:
        raise SystemExit("an encoder is needed (uv sync --extra embeddings)")
    encoder = life.cached(load_encoder(spec))
    clock = life.Clock(life._life_now(data))
    store, _ = life.life_store(Path(tempfile.mkdtemp()) / "life", encoder, clock)
    ids: dict[str, list[str]] = {}
    for note in data["notes"]:
        clock.now = datetime.fromisoformat(note["date"])
        ids.setdefault(life.save_as_the_app(store, life._draft(note)).id, []).append(note["id"])
    clock.now = life._life_now(data)
    rng = random.Random(args.seed)
    filler = UniqueTexts(args.seed, 1)
    cases: dict[str, list[tuple[str, set[str]]]] = {"question last": [], "question first": []}
    for question in data["questions"]:
        zh = cjk_share(question["query"]) > 0.3
        pool = ZH_SENTENCES if zh else EN_SENTENCES
        chatter = [filler._fill(rng.choice(pool), zh) for _ in range(rng.randint(2, 4))]
        joined = "".join(chatter) if zh else " ".join(chatter)
        space = "" if zh else " "
        gold = set(question["gold"])
        cases["question last"].append((joined + space + question["query"], gold))
        cases["question first"].append((question["query"] + space + joined, gold))
    product = plan.vector_text
    variants: list[tuple[str, Callable[[str], str]]] = [("the product's", product)]
    for item in args.compare:
        share, tokens = (float(x) for x in item.split(":"))
        variants.append((f"head {share:.2f} of {tokens:g} tokens", split_text(share, tokens)))
    print("| vector text | question last | question first |\n|---|---|---|")
    for name, function in variants:
        plan.vector_text = function  # type: ignore[assignment]
        shares = []
        for prompts in cases.values():
            store._query_vectors = plan.QueryVectors()
            found = 0
            for prompt, gold in prompts:
                hits = store.search(prompt, limit=5, record_access=False)
                found += bool({n for h in hits for n in ids.get(h.id, [])} & gold)
            shares.append(found / len(prompts))
        print(f"| {name} | {shares[0]:.3f} | {shares[1]:.3f} |", flush=True)
    plan.vector_text = product
    return 0


if __name__ == "__main__":
    sys.exit(main())
