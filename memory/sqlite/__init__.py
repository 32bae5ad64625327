"""Backend 1, one machine: markdown files + a derived SQLite index (`index`, FTS5 and
vectors), the store over them (`store`), and `<home>/state.db` (`state`: episodes,
pending memories, injection windows), which is not derived and is kept apart.
"""
