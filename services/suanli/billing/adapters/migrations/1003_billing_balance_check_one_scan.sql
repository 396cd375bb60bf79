-- The commit-time balance check reads a charge's entries once, through ledger_entries_charge. Its first
-- form also asked for the charge's first entry with ORDER BY entry_id LIMIT 1, which the planner could answer
-- by walking the primary key from the ledger's oldest entry and filtering on the charge: on a young ledger
-- whose statistics were still stale that cost 3-5 ms per entry, growing with the ledger
-- (bench/latency.py, 2026-12-06).
CREATE OR REPLACE FUNCTION billing_check_balanced() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    total numeric;
    debit numeric;
    n integer;
BEGIN
    SELECT coalesce(sum(e.amount), 0), count(*), (array_agg(e.amount ORDER BY e.entry_id))[1]
      INTO total, n, debit
      FROM ledger_entries e WHERE e.charge_id = NEW.charge_id;
    IF n < 2 OR total <> 0 OR debit IS DISTINCT FROM (SELECT amount FROM charges WHERE charge_id = NEW.charge_id)
    THEN
        RAISE EXCEPTION 'billing: entries of charge % do not balance (% entries, sum %)', NEW.charge_id, n, total
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END $$;
