"""The truth: markdown notes on disk (front matter, atomic writes, layout) and what may be
written into them (`capture`: redaction of secrets, `<private>` spans), how a new note relates
to an older one (`facts`: the same fact, an update, another fact) and what a change to a note
is (`changes`: who made it, the version it leaves; docs/history.md).
"""
