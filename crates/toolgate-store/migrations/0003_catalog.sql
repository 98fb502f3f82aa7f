-- toolgate store, version 3: the governed catalogue.
--
-- catalog_tools: one row per tenant and tool id, the manifest as the
-- person registered it (JSON text) and the digest of its pin (source kind,
-- package, exact version, bins). Re-pinning any of those sets the state
-- back to 'shelved': an install approved for other bytes covers nothing.
-- The state changes only where the pin is still the one that was
-- installed, so an install of an old pin finishing late cannot mark a
-- re-pinned tool installed.
CREATE TABLE catalog_tools (
    tenant      TEXT NOT NULL,
    id          TEXT NOT NULL,
    manifest    TEXT NOT NULL,
    pin         TEXT NOT NULL,
    -- 'shelved' (registered, not installed), 'installed', 'failed'.
    state       TEXT NOT NULL,
    -- Where the installed files are (fetched tools).
    install_dir TEXT,
    last_error  TEXT,
    added_ms    BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    PRIMARY KEY (tenant, id),
    CHECK (state IN ('shelved', 'installed', 'failed'))
);

-- What the first install of a pin resolved (every dependency's version and
-- integrity hash): later installs of the same pin must fetch exactly these
-- bytes. Kept when a tool is removed, so that a tool added back is held to
-- what was approved before.
CREATE TABLE catalog_locks (
    tenant      TEXT NOT NULL,
    pin         TEXT NOT NULL,
    record      TEXT NOT NULL,
    recorded_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, pin)
);

-- The gates' policies of a tenant, over the defaults of the configuration.
CREATE TABLE catalog_policies (
    tenant     TEXT PRIMARY KEY,
    install    TEXT NOT NULL,
    execute    TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- Every install, health check and run, with how it ended.
CREATE TABLE catalog_runs (
    tenant      TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    tool_id     TEXT NOT NULL,
    -- 'install', 'health' or 'run'.
    kind        TEXT NOT NULL,
    bin         TEXT,
    argv        TEXT NOT NULL,
    -- 'ran', 'blocked', 'denied', 'unavailable', 'failed'.
    outcome     TEXT NOT NULL,
    exit_code   BIGINT,
    signal      BIGINT,
    duration_ms BIGINT NOT NULL,
    approval_id TEXT,
    detail      TEXT,
    started_ms  BIGINT NOT NULL,
    PRIMARY KEY (tenant, run_id)
);
CREATE INDEX catalog_runs_by_tool ON catalog_runs (tenant, tool_id, started_ms);
