-- Serving's tables, in the same schema as its event store (events, outbox, tracking), so a service's
-- new state, its events, the commands to the scheduler (outbox) and the consumed offset commit together.

-- The state of each service (records.state_of): what the aggregate decides from, one row per service.
CREATE TABLE services (
    service_id text PRIMARY KEY,
    tenant     text NOT NULL,
    name       text NOT NULL,
    live       boolean NOT NULL,
    state      jsonb NOT NULL,
    version    integer NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
-- One live service per tenant and name; a deleted one's name may be used again.
CREATE UNIQUE INDEX services_live_name ON services (tenant, name) WHERE live;

-- How facts of the scheduler's topics find their service: every replica's request id, job id and id.
CREATE TABLE replica_keys (
    key        text PRIMARY KEY,
    service_id text NOT NULL REFERENCES services (service_id)
);
