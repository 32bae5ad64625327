"""How a query becomes ranked note ids, backend-neutral and pure: query parsing and keyword
scoring (`keyword`), FTS5 words and BM25 (`fts5`), the multi-factor score (`ranking`),
keyword + vector fusion (`fusion`), the query plan (`plan`), row filters (`filters`) and
the backend-neutral half of note vectors (`vectors`: chunks, keys, pending work).
"""
