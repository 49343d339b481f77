"""Durable runs on DBOS Transact (the `durable` extra): the runs and their client
(`runs`), the store's faults and takeover (`store`), approvals (`approval`), refused
resumes (`refusals`), the replay of recorded runs (`replay`), and the few DBOS
internals they need, in one place (`internals`)."""
