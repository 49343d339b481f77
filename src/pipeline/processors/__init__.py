"""Built-in processors: pure, composable, each in its own module.

Heavy detector libraries are optional extras (`pip install 'pipeline-agents[guards]'`),
imported only when a processor that needs them is built, never when this package is.
"""

from __future__ import annotations

from pipeline.processors.batch import BatchPartsProcessor
from pipeline.processors.holdback import Held
from pipeline.processors.pii import PIIDetector
from pipeline.processors.pii_detectors import Finding, MissingDependency
from pipeline.processors.scrubber import SystemPromptScrubber

__all__ = [
    "BatchPartsProcessor",
    "Finding",
    "Held",
    "MissingDependency",
    "PIIDetector",
    "SystemPromptScrubber",
]
