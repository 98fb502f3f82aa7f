-- toolgate store, version 2: the pinned definitions of external MCP tools.
--
-- One row per tenant, server and tool: the definition a tool had when it
-- was first seen (or last approved), and at most one change to it that a
-- person has not approved. A server that changes a trusted tool (a "rug
-- pull": new instructions in its description, a new argument in its
-- schema) finds the change parked here and the tool disabled until a
-- person approves it. The definitions are kept whole, as JSON text, so
-- that the person reviews a diff of what the model would read.

CREATE TABLE tool_pins (
    tenant            TEXT NOT NULL,
    server            TEXT NOT NULL,
    tool              TEXT NOT NULL,
    -- The trusted definition and its digest.
    digest            TEXT NOT NULL,
    definition        TEXT NOT NULL,
    pinned_ms         BIGINT NOT NULL,
    -- Who approved it; NULL: pinned when first seen.
    approved_by       TEXT,
    -- The definition the server serves instead, when it differs.
    change_digest     TEXT,
    change_definition TEXT,
    change_seen_ms    BIGINT,
    -- 'pending' (waiting for a person) or 'rejected' (a person said no).
    change_state      TEXT,
    change_decided_by TEXT,
    change_decided_ms BIGINT,
    -- One pin per tool: two toolgates starting at once insert the same
    -- key, and only one first definition lands.
    PRIMARY KEY (tenant, server, tool),
    CHECK ((change_digest IS NULL) = (change_definition IS NULL)),
    CHECK ((change_digest IS NULL) = (change_seen_ms IS NULL)),
    CHECK ((change_digest IS NULL) = (change_state IS NULL)),
    CHECK (change_state IS NULL OR change_state IN ('pending', 'rejected'))
);
