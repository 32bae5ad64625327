"""Text to vectors (a leaf: imports nothing above it). `models` holds the encoder protocol,
its settings parser and the packaged models; `client` runs one in a worker process
(`python -m memory.encoders.worker`) so the app never blocks on a model load.
"""
