-- toolgate store, version 1: approvals (requests, grants, refusals, spends)
-- and the audit log. The same text runs on SQLite and on PostgreSQL: only
-- TEXT and BIGINT columns, times as unix milliseconds, ids as text. Every
-- table leads with the tenant and every index starts with it, so that no
-- query can reach another tenant's rows by accident of an index.

CREATE TABLE requests (
    id            TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    tool          TEXT NOT NULL,
    agent         TEXT NOT NULL,
    scope         TEXT NOT NULL,
    exact_digest  TEXT NOT NULL,
    state         TEXT NOT NULL,
    created_ms    BIGINT NOT NULL,
    expires_ms    BIGINT NOT NULL,
    decided_ms    BIGINT,
    decided_by    TEXT,
    outcome_id    TEXT,
    answer_reason TEXT,
    details       TEXT NOT NULL
);
-- One pending request per question: a second caller asking the same thing
-- at the same moment reuses the first one's request.
CREATE UNIQUE INDEX requests_one_pending ON requests (tenant, exact_digest) WHERE state = 'pending';
CREATE INDEX requests_by_time ON requests (tenant, created_ms);

CREATE TABLE grants (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    tool        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    uses        BIGINT,
    uses_left   BIGINT,
    spent       BIGINT NOT NULL,
    created_ms  BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    granted_by  TEXT NOT NULL,
    CHECK (uses_left IS NULL OR uses_left >= 0)
);
CREATE INDEX grants_by_digest ON grants (tenant, digest, expires_ms);

CREATE TABLE spends (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    grant_id    TEXT NOT NULL,
    call_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    at_ms       BIGINT NOT NULL
);
CREATE INDEX spends_by_grant ON spends (tenant, grant_id, at_ms);

CREATE TABLE refusals (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    tool        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    reason      TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    refused_by  TEXT NOT NULL
);
CREATE INDEX refusals_by_digest ON refusals (tenant, digest, expires_ms);

CREATE TABLE audit (
    tenant    TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    at_ms     BIGINT NOT NULL,
    tool      TEXT NOT NULL,
    agent     TEXT NOT NULL,
    decision  TEXT NOT NULL,
    record    TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL,
    PRIMARY KEY (tenant, seq)
);
CREATE INDEX audit_by_time ON audit (tenant, at_ms);

-- The last sequence number and hash of each tenant's chain: appends
-- serialise on this row, and verify compares the chain's end with it, so a
-- removed last record is found too.
CREATE TABLE audit_heads (
    tenant TEXT PRIMARY KEY,
    seq    BIGINT NOT NULL,
    hash   TEXT NOT NULL
);
