"""How metering runs: configuration from the environment, the faust app, the worker process."""
