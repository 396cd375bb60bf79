"""Pure core of the sensing agent: observations, task table, event records, fleet and network models."""
