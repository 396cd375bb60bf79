-- Billing's tables, in the same schema as its event store (events, outbox, tracking), so a charge, its
-- ledger entries, its outbox row and the consumed offset commit in one transaction.

-- Facts billing prices by, learnt from other services' events.
CREATE TABLE job_terms (
    job_id      text PRIMARY KEY,
    tenant      text NOT NULL,
    priority    integer NOT NULL,
    preemptible boolean NOT NULL,
    recorded_at timestamptz NOT NULL
);

CREATE TABLE node_regions (
    node_id    text PRIMARY KEY,
    region     text NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Usage that arrived before its job's terms or its node's region: rated when they arrive.
CREATE TABLE parked_usage (
    usage_event_id uuid PRIMARY KEY,
    job_id         text NOT NULL,
    node_id        text NOT NULL,
    usage          jsonb NOT NULL,
    parked_at      timestamptz NOT NULL
);
CREATE INDEX parked_usage_job ON parked_usage (job_id);
CREATE INDEX parked_usage_node ON parked_usage (node_id);

-- One row per usage event ever rated: the unique key that makes a re-delivered or re-published usage
-- event a no-op whatever offset it arrives at.
CREATE TABLE rated_usage (
    usage_event_id uuid PRIMARY KEY,
    rated_at       timestamptz NOT NULL
);

CREATE TABLE charges (
    seq                  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    charge_id            uuid PRIMARY KEY,
    usage_event_id       uuid REFERENCES rated_usage (usage_event_id),
    tenant               text NOT NULL,
    job_id               text NOT NULL,
    task_id              text NOT NULL,
    device_class         text NOT NULL,
    region               text NOT NULL,
    tier                 text NOT NULL,
    preemptible          boolean NOT NULL,
    window_start         timestamptz NOT NULL,
    window_end           timestamptz NOT NULL,
    cu_seconds           numeric(24, 6) NOT NULL,
    unit_price           numeric(24, 9) NOT NULL,
    amount               numeric(20, 6) NOT NULL,
    currency             text NOT NULL,
    usage_period_start   timestamptz NOT NULL,
    billing_period_start timestamptz NOT NULL,
    billing_period_end   timestamptz NOT NULL,
    reverses_charge_id   uuid UNIQUE REFERENCES charges (charge_id),
    recorded_at          timestamptz NOT NULL,
    UNIQUE (usage_event_id, device_class, window_start)
);
CREATE INDEX charges_tenant_billing ON charges (tenant, billing_period_start, seq);
CREATE INDEX charges_tenant_usage ON charges (tenant, usage_period_start);

-- Double entry: positive amounts debit, negative amounts credit.
CREATE TABLE ledger_entries (
    entry_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    charge_id   uuid NOT NULL REFERENCES charges (charge_id),
    account     text NOT NULL,
    amount      numeric(20, 6) NOT NULL,
    currency    text NOT NULL,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX ledger_entries_charge ON ledger_entries (charge_id);
CREATE INDEX ledger_entries_account ON ledger_entries (account);

CREATE TABLE invoices (
    invoice_id   uuid PRIMARY KEY,
    tenant       text NOT NULL,
    period_start timestamptz NOT NULL,
    period_end   timestamptz NOT NULL,
    period_label text NOT NULL,
    currency     text NOT NULL,
    total        numeric(20, 6) NOT NULL,
    issued_at    timestamptz NOT NULL,
    UNIQUE (tenant, period_start)
);

CREATE TABLE invoice_lines (
    invoice_id    uuid NOT NULL REFERENCES invoices (invoice_id),
    line_no       integer NOT NULL,
    device_class  text NOT NULL,
    description   text NOT NULL,
    cu_hours      numeric(24, 6) NOT NULL,
    unit          text NOT NULL,
    amount        numeric(20, 6) NOT NULL,
    adjustment_of text,
    PRIMARY KEY (invoice_id, line_no)
);

-- The ledger is append-only: a correction is a reversing charge, never an UPDATE or DELETE.
CREATE FUNCTION billing_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'billing: % is append-only (% refused); record a reversing charge instead',
        TG_TABLE_NAME, TG_OP USING ERRCODE = 'integrity_constraint_violation';
END $$;

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['rated_usage', 'charges', 'ledger_entries', 'invoices', 'invoice_lines'] LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW '
                       'EXECUTE FUNCTION billing_append_only()', t || '_append_only', t);
        EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT '
                       'EXECUTE FUNCTION billing_append_only()', t || '_no_truncate', t);
    END LOOP;
END $$;

-- At commit, every charge's entries must balance and its debit must equal the charge amount.
-- SET search_path FROM CURRENT pins this schema: triggers run under the caller's search_path.
CREATE FUNCTION billing_check_balanced() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    total numeric;
    debit numeric;
    n integer;
BEGIN
    SELECT coalesce(sum(amount), 0), count(*) INTO total, n
      FROM ledger_entries WHERE charge_id = NEW.charge_id;
    SELECT e.amount INTO debit FROM ledger_entries e
      WHERE e.charge_id = NEW.charge_id ORDER BY e.entry_id LIMIT 1;
    IF n < 2 OR total <> 0 OR debit IS DISTINCT FROM (SELECT amount FROM charges WHERE charge_id = NEW.charge_id)
    THEN
        RAISE EXCEPTION 'billing: entries of charge % do not balance (% entries, sum %)', NEW.charge_id, n, total
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER charges_balanced AFTER INSERT ON charges
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION billing_check_balanced();
CREATE CONSTRAINT TRIGGER ledger_entries_balanced AFTER INSERT ON ledger_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION billing_check_balanced();

-- An issued invoice is final: no charge may be billed into its period afterwards (late usage goes to the
-- next open period as an adjustment; the service layer chooses it, this is the backstop).
CREATE FUNCTION billing_period_open() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM invoices WHERE tenant = NEW.tenant AND period_start = NEW.billing_period_start) THEN
        RAISE EXCEPTION 'billing: period % of tenant % is already invoiced', NEW.billing_period_start, NEW.tenant
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER charges_period_open BEFORE INSERT ON charges
    FOR EACH ROW EXECUTE FUNCTION billing_period_open();
