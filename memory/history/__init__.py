"""A note's history kept in the state database (docs/history.md): its versions (`store`:
`HistoryStore`, `mem_note_versions`) and the supersessions waiting for the person
(`conflicts`: `ConflictStore`, `mem_supersessions`). What a change is and the version it
leaves (who made it, the snapshot, the cap) is pure and lives with the notes
(`memory.notes.changes`), where the seam and the core that records every version can use it.
"""
