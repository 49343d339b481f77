"""Moved to `interpreters.observers.otel`.

This path works for one more release and warns when imported: change the import."""

import warnings

from interpreters.observers.otel import (
    DURATION_BUCKETS as DURATION_BUCKETS,
)
from interpreters.observers.otel import (
    SCOPE as SCOPE,
)
from interpreters.observers.otel import (
    TOKEN_BUCKETS as TOKEN_BUCKETS,
)
from interpreters.observers.otel import (
    OTelObserver as OTelObserver,
)
from interpreters.observers.otel import (
    provider_of as provider_of,
)

warnings.warn(
    "interpreters.otel moved to interpreters.observers.otel; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
