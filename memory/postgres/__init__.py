"""Backend 2, several instances as one: notes, vectors (pgvector) and state in PostgreSQL."""
