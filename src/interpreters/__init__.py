"""The shell: interpreters that carry out the agent loop's commands, and the providers."""
