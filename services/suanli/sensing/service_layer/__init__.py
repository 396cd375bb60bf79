"""Use cases of the agent over ports: register, report, run placed tasks; many agents in one process."""
