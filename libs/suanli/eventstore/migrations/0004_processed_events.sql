-- Event ids a consumer group has applied. Offsets alone cannot tell a redelivery from a new record once
-- the broker has restarted empty (Tansu is memory-only: offsets start again at 0), so consumers that pass
-- the event id are de-duplicated by it and keep working across such a restart.
CREATE TABLE processed_events (
    group_id     text        NOT NULL,
    event_id     text        NOT NULL,
    topic        text        NOT NULL,
    partition    integer     NOT NULL,
    "offset"     bigint      NOT NULL,
    processed_at timestamptz NOT NULL,
    PRIMARY KEY (group_id, event_id)
);
