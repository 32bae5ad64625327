"""Several OS processes writing the same memory at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from memory.config import MemoryConfig
from memory.sqlite.store import MemoryStore

WRITER = textwrap.dedent(
    """
    import sys, uuid
    from pathlib import Path
    from memory.config import MemoryConfig
    from memory.model import NoteDraft
    from memory.sqlite.store import MemoryStore

    home, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    sys.stdin.readline()  # start together
    with MemoryStore.open(MemoryConfig.for_home(home)) as store:
        for i in range(count):
            token = uuid.uuid4().hex
            result = store.save(NoteDraft(content=f"{name} 笔记 {i} {token} " + token[::-1]))
            assert not result.deduplicated
            if i % 50 == 0:
                store.search(f"{name} 笔记")
    print("ok")
    """
)


def test_two_processes_saving_500_notes_each(home: Path) -> None:
    MemoryStore.open(MemoryConfig.for_home(home)).close()  # layout + schema
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(home), name, "500"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "beta")
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, err = proc.communicate(timeout=110)
        assert proc.returncode == 0, err
        assert out.strip() == "ok" and "Traceback" not in err

    files = list((home / "memory" / "inbox").glob("*.md"))
    assert len(files) == 1000
    with MemoryStore.open(MemoryConfig.for_home(home)) as store:
        assert store.count() == 1000 + 1  # + profile
        assert store.sync().changed is False  # the index already matched the files
        assert len(store.search("alpha 笔记", limit=1000)) >= 500
        listed = store.list(limit=1000) + store.list(limit=1000, offset=1000)
        assert len({n.id for n in listed}) == 1001


def test_two_processes_opening_a_fresh_home_at_once(home: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from memory.config import MemoryConfig;"
        "from memory.sqlite.store import MemoryStore;"
        "MemoryStore.open(MemoryConfig.for_home(Path(sys.argv[1]))).close()"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(home)]) for _ in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    with MemoryStore.open(MemoryConfig.for_home(home)) as store:
        assert store.count() == 1
