"""Billing (算力服务): price book, rating, a double-entry ledger in PostgreSQL, periods and invoices.

`domain/` is the pure core (price book, rating, ledger entries, periods, invoices); `service_layer/` applies
consumed facts and admin commands inside one unit of work; `adapters/` holds PostgreSQL, contract records
and the price-book file; `entrypoints/` the gRPC API and the long-lived process (`suanli serve billing`).
"""
