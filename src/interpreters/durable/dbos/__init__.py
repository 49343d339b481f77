"""Durable runs on DBOS Transact (the `durable` extra): the runs and their client
(`runs`), the store's faults and takeover (`store`), approvals (`approval`) and the
replay of recorded runs (`replay`)."""
