use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;

const JQ: &str = r#"
id = "jq"
name = "jq"
description = "Command-line JSON processor"
source_kind = "apt-package"
apt_package = "jq"
apt_version = "1.6-2.1"
risk = "low"
capabilities = ["json"]
[[bins]]
name = "jq"
bin = "/usr/bin/jq"
health_check_args = ["--version"]
"#;

fn error_of(file: &str, text: &str) -> String {
    match parse_file(Path::new(file), text) {
        Ok(m) => panic!("{file} parsed: {m:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_issue_example_reads_with_its_defaults() {
    let manifests = parse_file(Path::new("jq.toml"), JQ).unwrap();
    assert_eq!(manifests.len(), 1);
    let jq = &manifests[0];
    assert_eq!(
        (jq.id.as_str(), jq.source_kind, jq.risk),
        ("jq", SourceKind::Apt, Risk::Low)
    );
    assert_eq!(
        jq.package,
        Some(Package {
            name: "jq".into(),
            version: "1.6-2.1".into()
        })
    );
    assert_eq!(jq.effect_class, EffectClass::MutateIrreversible);
    assert_eq!(jq.idempotency, Idempotency::AtMostOnce);
    assert_eq!(jq.network, Network::None);
    assert_eq!(jq.approval_scope, RunScope::Exact);
    assert!(jq.is_safe());
}

#[test]
fn a_manifest_reads_back_from_its_own_document() {
    let text = r#"
[[tools]]
id = "cowsay"
description = "Talking cow"
source_kind = "npm-package"
package_name = "cowsay"
package_version = "1.6.0"
risk = "medium"
network = { allow = ["api.example.com"] }
approval_scope = "command"
effect_class = "read"
idempotency = "check-before-act"
limits = { memory_mb = 256, processes = 16, timeout_seconds = 30 }
docs_url = "https://example.com/cowsay"
min_release_age_days = 0
[[tools.bins]]
name = "cowsay"

[[tools]]
id = "ruff"
description = "Python linter"
source_kind = "pypi-package"
package_name = "ruff"
package_version = "0.6.9"
risk = "low"
[[tools.bins]]
name = "ruff"
"#;
    let manifests = parse_file(Path::new("many.toml"), text).unwrap();
    assert_eq!(manifests.len(), 2);
    assert_eq!(manifests[0].bins[0].bin, "node_modules/.bin/cowsay");
    assert_eq!(manifests[1].bins[0].bin, "venv/bin/ruff");
    for m in &manifests {
        let back = parse_document("stored", m.to_document()).unwrap();
        assert_eq!(&back[0], m);
    }
    // JSON too, as an array.
    let json = serde_json::to_string(
        &manifests
            .iter()
            .map(Manifest::to_document)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!(
        parse_file(Path::new("many.json"), &json).unwrap(),
        manifests
    );
}

#[test]
fn every_error_names_the_file_the_tool_the_field_and_what_was_expected() {
    let with = |from: &str, to: &str| JQ.replace(from, to);
    let cases: Vec<(String, &str)> = vec![
        (
            with("apt_version = \"1.6-2.1\"", "apt_version = \"*\""),
            "jq.toml: tool `jq`: field `apt_version`: expected an exact Debian version",
        ),
        (
            with("risk = \"low\"", "risk = \"lowish\""),
            "jq.toml: tool `jq`: field `risk`: unknown risk `lowish`, expected one of: low, medium, high",
        ),
        (
            with("capabilities", "capabilites"),
            "jq.toml: tool `jq`: field `capabilites`: unknown field; did you mean `capabilities`?",
        ),
        (
            with("bin = \"/usr/bin/jq\"", "bin = \"/home/me/jq\""),
            "jq.toml: tool `jq`: field `bins[0].bin`: expected an absolute path without `..` under /usr",
        ),
        (
            with("bin = \"/usr/bin/jq\"", "bin = \"/usr/bin/../../home/jq\""),
            "field `bins[0].bin`: expected an absolute path without `..`",
        ),
        (
            with("apt_package = \"jq\"", "package_name = \"jq\""),
            "field `package_name`: not a field of a apt-package tool: a apt-package names its package with `apt_package` and `apt_version`",
        ),
        (
            with("id = \"jq\"", "id = \"j q\""),
            "jq.toml: tool `j q`: field `id`: expected 1 to 48 letters, digits, `_` or `-`, got \"j q\"",
        ),
        (
            with("description = \"Command-line JSON processor\"", ""),
            "jq.toml: tool `jq`: field `description`: missing",
        ),
        (
            with(
                "health_check_args = [\"--version\"]",
                "health_check = [\"--version\"]",
            ),
            "field `bins[0].health_check`: unknown field; did you mean `health_check_args`?",
        ),
    ];
    for (text, expected) in cases {
        let error = error_of("jq.toml", &text);
        assert!(error.contains(expected), "{error}\n  wanted: {expected}");
    }
}

#[test]
fn floating_versions_are_refused_for_every_package_kind() {
    for (kind, version) in [
        ("npm-package", "latest"),
        ("npm-package", "^1.6.0"),
        ("cargo-crate", "*"),
        ("pypi-package", ">=6"),
    ] {
        let text = format!(
            "id = \"t\"\ndescription = \"d\"\nsource_kind = \"{kind}\"\npackage_name = \"p\"\npackage_version = \"{version}\"\nrisk = \"low\"\n[[bins]]\nname = \"t\"\n"
        );
        let error = error_of("t.toml", &text);
        assert!(
            error.contains("field `package_version`: expected an exact"),
            "{kind} {version}: {error}"
        );
        assert!(error.contains(&format!("got {version:?}")), "{error}");
    }
}

#[test]
fn a_fetched_tools_bin_stays_inside_its_install_directory() {
    for bin in [
        "../../bin/sh",
        "/bin/sh",
        "node_modules/../../../etc/passwd",
    ] {
        let text = format!(
            "id = \"t\"\ndescription = \"d\"\nsource_kind = \"npm-package\"\npackage_name = \"p\"\npackage_version = \"1.0.0\"\nrisk = \"low\"\n[[bins]]\nname = \"t\"\nbin = \"{bin}\"\n"
        );
        let error = error_of("t.toml", &text);
        assert!(
            error.contains("expected a path inside the tool's install directory"),
            "{bin}: {error}"
        );
    }
}

#[test]
fn a_file_with_two_tools_of_one_id_is_refused() {
    let text = format!(
        "[[tools]]\n{}\n[[tools]]\n{}",
        JQ.replace("[[bins]]", "[[tools.bins]]"),
        JQ.replace("[[bins]]", "[[tools.bins]]")
    );
    let error = error_of("two.toml", &text);
    assert!(
        error.contains("tool `jq`: field `id`: used by tools 1 and 2"),
        "{error}"
    );
}

#[test]
fn re_pinning_changes_the_pin_digest_and_nothing_else_does() {
    let base = parse_file(Path::new("jq.toml"), JQ).unwrap().remove(0);
    let same = parse_file(
        Path::new("jq.toml"),
        &JQ.replace("risk = \"low\"", "risk = \"high\""),
    )
    .unwrap()
    .remove(0);
    assert_eq!(base.pin_digest(), same.pin_digest());
    for (from, to) in [
        ("1.6-2.1", "1.6-2.2"),
        ("apt_package = \"jq\"", "apt_package = \"jq2\""),
        ("/usr/bin/jq", "/usr/local/bin/jq"),
    ] {
        let other = parse_file(Path::new("jq.toml"), &JQ.replace(from, to))
            .unwrap()
            .remove(0);
        assert_ne!(base.pin_digest(), other.pin_digest(), "{from} -> {to}");
    }
}
