"""Suspended runs kept and resumed: `Approvals` over an `ApprovalStore` (in memory,
SQLite or PostgreSQL: `open_approval_store(url)`), the `ApprovalDesk` of in-process runs."""

from interpreters.approvals.desk import ApprovalDesk
from interpreters.approvals.sql import (
    ApprovalStoreError,
    ApprovalStoreUnavailable,
    CorruptStoredSuspension,
    PostgresApprovalStore,
    SQLiteApprovalStore,
    SuspensionNotStorable,
    open_approval_store,
)
from interpreters.approvals.store import Approvals, ApprovalStore, MemoryApprovalStore

__all__ = [
    "ApprovalDesk", "ApprovalStore", "ApprovalStoreError", "ApprovalStoreUnavailable", "Approvals",
    "CorruptStoredSuspension", "MemoryApprovalStore", "PostgresApprovalStore",
    "SQLiteApprovalStore", "SuspensionNotStorable", "open_approval_store",
]
