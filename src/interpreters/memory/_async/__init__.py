"""The memory store protocol and the memory requests' answers, awaited: the source
`scripts/unasync.py` writes `_sync/` from.

Import them from `interpreters.memory`. Edit the files here (and `_sync/worker.py`,
written by hand), never the generated ones in `_sync/`; then run
`python scripts/unasync.py`.
"""
