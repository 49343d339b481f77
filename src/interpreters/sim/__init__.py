"""The simulators: the sync and async interpreters on scripted models and virtual time
(`clock`), and the pytest plugin. Tests import them from `interpreters.testing`."""
