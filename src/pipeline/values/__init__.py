"""The values a run is made of: messages, chunks, a model call, a result, costs, bounds.

Frozen data and the pure checks over it; nothing here knows the loop.
"""
