"""The memory store protocol and the memory requests' answers, generated from `_async/`
by `scripts/unasync.py` (except `worker.py`, written by hand).

Import them from `interpreters.memory`.
"""
