-- Records waiting to be published to Kafka, written in the same transaction as the events they announce.
-- `id` is the publishing order; rows are kept after publishing (published_at set) for audit.
CREATE TABLE outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic         text        NOT NULL,
    key           bytea,
    event_name    text        NOT NULL,
    value         bytea       NOT NULL,
    header_names  text[]      NOT NULL DEFAULT '{}',
    header_values bytea[]     NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL,
    published_at  timestamptz,
    CONSTRAINT outbox_headers_paired CHECK (cardinality(header_names) = cardinality(header_values))
);

-- The relay only ever scans unpublished rows in id order: a partial index keeps that cheap however many
-- published rows accumulate.
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;

-- Wake the relay when a transaction that wrote outbox rows commits (NOTIFY is delivered at commit, and
-- repeated notifications of one transaction are folded into one). The channel names the schema so relays
-- of different schemas in one database do not wake each other.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('suanli_outbox:' || TG_TABLE_SCHEMA, '');
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
