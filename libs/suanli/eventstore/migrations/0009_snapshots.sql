-- Snapshots of projections folded from `events` (the scheduler's), so a new leader starts from the latest
-- one and reads only the events after its `position`, not every event since position 0. `format` names
-- the shape of `state`: a reader that expects another format ignores the row. The writer keeps the
-- latest few per name and deletes the rest.
CREATE TABLE snapshots (
    name      text        NOT NULL,
    position  bigint      NOT NULL,
    format    text        NOT NULL,
    state     bytea       NOT NULL,
    taken_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, position)
);
