-- Every event of every stream. `position` is the global order read_all follows; appends are serialised
-- by a table lock, so positions are assigned in commit order (gaps possible, never reordering).
CREATE TABLE events (
    position    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text        NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    event_id    uuid        NOT NULL,
    event_name  text        NOT NULL,
    payload     bytea       NOT NULL,
    metadata    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    recorded_at timestamptz NOT NULL,
    CONSTRAINT events_stream_version_key UNIQUE (stream, version),
    CONSTRAINT events_event_id_key UNIQUE (event_id)
);
