"""Billing (算力服务): price book, rating, a double-entry ledger in PostgreSQL, periods and invoices.

`domain/` is the pure core (price book, rating, ledger entries, periods, invoices); `service_layer/` applies
consumed facts and admin commands inside one unit of work over four narrow ports (terms, parking, ledger,
invoices); `adapters/` implements them in memory and on PostgreSQL, and holds contract records and the
price-book file; `bootstrap.py` chooses the adapters; `entrypoints/` the consumer, the gRPC API, the
settings and the long-lived process (`suanli serve billing`). See docs/billing.md.
"""
