"""The async providers and resolver: the source `scripts/unasync.py` writes `_sync/` from.

Import them from `interpreters.providers`. Edit the files here (and `_sync/bounded.py`,
written by hand), never the generated ones in `_sync/`; then run
`python scripts/unasync.py`.
"""
