"""The functional core: messages, chunks, processors and the agent loop. No I/O."""
