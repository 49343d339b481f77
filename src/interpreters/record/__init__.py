"""Journals of runs (`journal`, scrubbed of secrets by `scrub`) and their replay
against the same or a changed agent (`replay`)."""
