"""Suspended runs kept and resumed: `Approvals` over an `ApprovalStore` (in memory,
SQLite or PostgreSQL: `open_approval_store(url)`), the `ApprovalDesk` of in-process runs;
the rules on deciders (`ApprovalPolicy`) and the audit trail (`AuditRecord`)."""

from interpreters.approvals.audit import AuditRecord
from interpreters.approvals.desk import ApprovalDesk, decide_answers
from interpreters.approvals.policy import (
    ApprovalPolicy,
    DeciderNotAllowed,
    SecondApprovalNeeded,
    ToolApprovalRule,
)
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
    "ApprovalDesk", "ApprovalPolicy", "AuditRecord", "DeciderNotAllowed", "SecondApprovalNeeded",
    "ToolApprovalRule", "decide_answers", "ApprovalStore", "ApprovalStoreError",
    "ApprovalStoreUnavailable",
    "Approvals",
    "CorruptStoredSuspension", "MemoryApprovalStore", "PostgresApprovalStore",
    "SQLiteApprovalStore", "SuspensionNotStorable", "open_approval_store",
]
