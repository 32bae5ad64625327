"""The MCP server's tools, by job (issue #32: eleven tools where there were 26).

`catalog` names them and their input schemas, and imports nothing heavy: the server answers
`initialize` and `tools/list` from it before anything else loads. `registry` pairs each
schema with its function (`notes`, `observations`, `review`, `status`), which import the
memory itself; the server imports it on the first tool call (or in the background right after
the tool list went out). `schema` checks arguments against the schemas, as they read.
"""
