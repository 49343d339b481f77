"""The sync providers and resolver, generated from `_async/` by `scripts/unasync.py`
(except `bounded.py`, the sync side's bounded waits, written by hand).

Import them from `interpreters.providers`.
"""
