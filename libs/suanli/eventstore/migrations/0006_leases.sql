-- Leases with a persistent epoch (a fencing token), one row per role: the scheduler's leadership, the
-- outbox relay. `epoch` only grows; `holder_pid` is the backend of the holder's lease connection, so a
-- holder whose session is gone is replaced at once, one that is paused once `lease_until` has passed.
CREATE TABLE leases (
    name        text PRIMARY KEY,
    epoch       bigint NOT NULL,
    holder_pid  integer NOT NULL,
    lease_until timestamptz NOT NULL
);
