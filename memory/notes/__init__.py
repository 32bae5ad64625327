"""The truth: markdown notes on disk (front matter, atomic writes, layout) and what may be
written into them (`capture`: redaction of secrets, `<private>` spans).
"""
