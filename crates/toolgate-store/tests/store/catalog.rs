//! The catalogue's records: a tool's pin and state through registrations,
//! installs and re-pins; the first lock of a pin kept; policies and runs per
//! tenant.

use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate_store::{CatalogRun, CatalogState, Registered};

use crate::both;
use crate::common::{Db, tenant};

async fn state(db: &Db, id: &str) -> (CatalogState, Option<String>, String) {
    let tools = db
        .store
        .catalog_tools(&tenant("t"), Some(id))
        .await
        .unwrap();
    let tool = &tools[0];
    (tool.state, tool.install_dir.clone(), tool.pin.clone())
}

both!(a_new_pin_shelves_an_installed_tool_and_a_late_install_of_the_old_pin_changes_nothing);
async fn a_new_pin_shelves_an_installed_tool_and_a_late_install_of_the_old_pin_changes_nothing(
    db: Db,
) {
    let t = tenant("t");
    let v1 = json!({"id": "jq", "version": "1"});
    let s = &db.store;
    assert_eq!(
        s.register_catalog_tool(&t, "jq", &v1, "pin1")
            .await
            .unwrap(),
        Registered::Added
    );
    assert_eq!(
        s.register_catalog_tool(&t, "jq", &v1, "pin1")
            .await
            .unwrap(),
        Registered::Unchanged
    );
    assert_eq!(
        state(&db, "jq").await,
        (CatalogState::Shelved, None, "pin1".into())
    );
    assert!(
        s.set_catalog_state(
            &t,
            "jq",
            "pin1",
            CatalogState::Installed,
            Some("/d/1"),
            None
        )
        .await
        .unwrap()
    );
    // Another description: the install stays.
    let described = json!({"id": "jq", "version": "1", "description": "new words"});
    assert_eq!(
        s.register_catalog_tool(&t, "jq", &described, "pin1")
            .await
            .unwrap(),
        Registered::Updated
    );
    assert_eq!(
        state(&db, "jq").await,
        (CatalogState::Installed, Some("/d/1".into()), "pin1".into())
    );
    // Another pin: shelved again, whatever it was.
    let v2 = json!({"id": "jq", "version": "2"});
    assert_eq!(
        s.register_catalog_tool(&t, "jq", &v2, "pin2")
            .await
            .unwrap(),
        Registered::Repinned
    );
    assert_eq!(
        state(&db, "jq").await,
        (CatalogState::Shelved, None, "pin2".into())
    );
    // An install of the old pin finishing late marks nothing.
    assert!(
        !s.set_catalog_state(
            &t,
            "jq",
            "pin1",
            CatalogState::Installed,
            Some("/d/1"),
            None
        )
        .await
        .unwrap()
    );
    assert_eq!(state(&db, "jq").await.0, CatalogState::Shelved);
    // Another tenant sees none of it.
    assert!(
        s.catalog_tools(&tenant("other"), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        s.remove_catalog_tool(&tenant("other"), "jq")
            .await
            .unwrap()
            .is_none()
    );
    let removed = s.remove_catalog_tool(&t, "jq").await.unwrap().unwrap();
    assert_eq!(removed.manifest, v2);
    assert!(s.catalog_tools(&t, None).await.unwrap().is_empty());
}

both!(the_first_record_of_a_pin_stays_and_policies_and_runs_are_per_tenant);
async fn the_first_record_of_a_pin_stays_and_policies_and_runs_are_per_tenant(db: Db) {
    let (t, other) = (tenant("t"), tenant("other"));
    let s = &db.store;
    assert_eq!(s.catalog_lock(&t, "pin").await.unwrap(), None);
    let first = json!({"kind": "npm", "packages": {"a": "sha-1"}});
    let second = json!({"kind": "npm", "packages": {"a": "sha-2"}});
    assert_eq!(
        s.record_catalog_lock(&t, "pin", &first).await.unwrap(),
        first
    );
    // A later install is held to the first record.
    assert_eq!(
        s.record_catalog_lock(&t, "pin", &second).await.unwrap(),
        first
    );
    assert_eq!(s.catalog_lock(&t, "pin").await.unwrap(), Some(first));
    assert_eq!(s.catalog_lock(&other, "pin").await.unwrap(), None);

    assert_eq!(s.catalog_policies(&t).await.unwrap(), None);
    s.set_catalog_policies(&t, "deny", "approval")
        .await
        .unwrap();
    s.set_catalog_policies(&t, "approval", "allow_all")
        .await
        .unwrap();
    assert_eq!(
        s.catalog_policies(&t).await.unwrap(),
        Some(("approval".into(), "allow_all".into()))
    );
    assert_eq!(s.catalog_policies(&other).await.unwrap(), None);

    let mut run = CatalogRun::new("jq", "run");
    run.bin = Some("jq".into());
    run.argv = vec![".a".into(), "--raw-output".into()];
    run.outcome = "ran".into();
    run.exit_code = Some(0);
    run.duration_ms = 12;
    run.approval_id = Some("grant_x".into());
    s.record_catalog_run(&t, &run).await.unwrap();
    let mut health = CatalogRun::new("rg", "health");
    health.outcome = "failed".into();
    health.signal = Some(9);
    s.record_catalog_run(&t, &health).await.unwrap();
    let runs = s.catalog_runs(&t, Some("jq")).await.unwrap();
    assert_eq!(runs.len(), 1);
    let stored = &runs[0];
    assert!(stored.started_ms > 0);
    assert_eq!(
        (
            &stored.argv,
            stored.exit_code,
            stored.approval_id.as_deref()
        ),
        (&run.argv, Some(0), Some("grant_x"))
    );
    assert_eq!(s.catalog_runs(&t, None).await.unwrap().len(), 2);
    assert!(s.catalog_runs(&other, None).await.unwrap().is_empty());
}
