-- The autoscaler's decisions, kept to explain them (ExplainService): per service the last N that changed
-- the replica count and the latest that held it. `decision` is records.decision_of (inputs, model
-- figures, counts, reason); N is the autoscaler's `decisions_kept` setting.
CREATE TABLE autoscaler_decisions (
    seq           bigserial PRIMARY KEY,
    service_id    text NOT NULL REFERENCES services (service_id),
    decided_at    timestamptz NOT NULL,
    from_replicas integer NOT NULL,
    changed       boolean NOT NULL,
    decision      jsonb NOT NULL
);
CREATE INDEX autoscaler_decisions_service ON autoscaler_decisions (service_id, seq DESC);
