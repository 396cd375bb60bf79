"""Ordered SQL migrations of the event store schema (NNNN_name.sql), applied by suanli.eventstore.migrator."""
