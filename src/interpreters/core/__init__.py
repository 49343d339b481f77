"""What every interpreter is made with: run options, cancelling and deadlines, the
handlers of processors' own requests, and the trace of a run."""
