-- The highest offset each consumer group has applied per partition, updated in the same transaction as
-- the effect of that record: a redelivered record finds its offset here and is skipped.
CREATE TABLE tracking (
    group_id    text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    last_offset bigint      NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (group_id, topic, partition)
);
