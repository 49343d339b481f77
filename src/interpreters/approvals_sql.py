"""Moved to `interpreters.approvals`.

This path works for one more release and warns when imported: change the import."""

import warnings

from interpreters.approvals.sql import (
    APPROVAL_SCHEMA_VERSION as APPROVAL_SCHEMA_VERSION,
)
from interpreters.approvals.sql import (
    ApprovalStoreError as ApprovalStoreError,
)
from interpreters.approvals.sql import (
    ApprovalStoreUnavailable as ApprovalStoreUnavailable,
)
from interpreters.approvals.sql import (
    CorruptStoredSuspension as CorruptStoredSuspension,
)
from interpreters.approvals.sql import (
    PostgresApprovalStore as PostgresApprovalStore,
)
from interpreters.approvals.sql import (
    SQLiteApprovalStore as SQLiteApprovalStore,
)
from interpreters.approvals.sql import (
    SuspensionNotStorable as SuspensionNotStorable,
)
from interpreters.approvals.sql import (
    T as T,
)
from interpreters.approvals.sql import (
    decode_suspension as decode_suspension,
)
from interpreters.approvals.sql import (
    encode_suspension as encode_suspension,
)
from interpreters.approvals.sql import (
    open_approval_store as open_approval_store,
)

warnings.warn(
    "interpreters.approvals_sql moved to interpreters.approvals; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
