"""A note's history (docs/history.md): what a change is and the version it leaves (`changes`:
who made it, the snapshot, the cap; pure, used by the seam and the core that records
versions), where the versions are kept (`store`: `HistoryStore`, `mem_note_versions`) and the
supersessions waiting for the person (`conflicts`: `ConflictStore`, `mem_supersessions`), both
in the state database.
"""
