"""Moved to `interpreters.providers.prices`.

This path works for one more release and warns when imported: change the import."""

import warnings

from interpreters.providers.prices import (
    PricesNotInstalled as PricesNotInstalled,
)
from interpreters.providers.prices import (
    genai_prices as genai_prices,
)

warnings.warn(
    "interpreters.prices moved to interpreters.providers.prices; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
