-- "Is this tenant known?" (the API answers NOT_FOUND for one billing never heard of) looks up job terms
-- by tenant; charges and invoices already have indexes led by the tenant.
CREATE INDEX job_terms_tenant ON job_terms (tenant);
