//! The shelf itself: manifests that do not read, the listing, and the
//! image manifest.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn a_manifest_that_does_not_read_names_the_file_the_tool_the_field_and_the_fix() {
    let s = Shelf::new();
    for (text, expected) in [
        (
            COWSAY.replace("1.6.0", "latest"),
            "bad.toml: tool `cowsay`: field `package_version`: expected an exact npm version",
        ),
        (
            COWSAY.replace("risk", "rsik"),
            "bad.toml: tool `cowsay`: field `rsik`: unknown field; did you mean `risk`?",
        ),
        (
            COWSAY.replace("npm-package", "npm"),
            "field `source_kind`: unknown source kind `npm`, expected one of: npm-package, pypi-package, cargo-crate, apt-package, binary-path",
        ),
    ] {
        let file = s.write("manifests/bad.toml", &text);
        let o = s.run(&["catalog", "add", file.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{text}");
        said(&o, expected);
    }
    // Nothing of a bad file is registered, not even its good tools.
    let file = s.write(
        "manifests/mixed.json",
        &format!(
            "[{}, {{\"id\": \"bad\"}}]",
            serde_json::json!({"id": "sh", "description": "d", "source_kind": "binary-path", "risk": "low", "bins": [{"name": "sh", "bin": "/bin/sh"}]})
        ),
    );
    let o = s.run(&["catalog", "add", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    said(&o, "mixed.json: tool `bad`: field `description`: missing");
    assert_eq!(
        s.json(0, &["catalog", "list", "--json"]),
        serde_json::json!([])
    );
    // An unknown id has a did-you-mean.
    s.add("cowsay", COWSAY);
    let o = s.run(&["catalog", "install", "cowsya"]);
    assert_eq!(o.status.code(), Some(2));
    said(&o, "no catalogue tool `cowsya`; did you mean `cowsay`?");
}

#[test]
fn the_image_manifest_is_byte_identical_across_runs_and_refuses_two_pins_of_one_package() {
    let version = dpkg_version("jq");
    let s = Shelf::new();
    s.add("jq", &jq("jq", &version, "/usr/bin/jq"));
    s.add("cowsay", COWSAY);
    s.add("pycowsay", PYCOWSAY);
    s.add("sh", SH);
    let first = s.expect(0, &["catalog", "image"]);
    let again = s.expect(0, &["catalog", "image", "--json"]);
    assert_eq!(first, again);
    let image: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(image["apt"][0]["name"], "jq");
    assert_eq!(image["apt"][0]["version"], version.as_str());
    assert_eq!(image["npm"][0]["version"], "1.6.0");
    assert_eq!(image["pypi"][0]["name"], "cowsay");
    assert_eq!(image["binaries"][0]["path"], "/bin/sh");
    assert_eq!(
        s.expect(0, &["catalog", "image", "--apt-fragment"]),
        format!("apt-get install -y --no-install-recommends jq={version}\n")
    );
    let dockerfile = s.expect(0, &["catalog", "image", "--dockerfile"]);
    assert!(
        dockerfile.contains(&format!("jq={version}")) && dockerfile.contains("cowsay@1.6.0"),
        "{dockerfile}"
    );
    // Registered in another order, in another store: the same bytes.
    let other = Shelf::new();
    other.add("sh", SH);
    other.add("pycowsay", PYCOWSAY);
    other.add("cowsay", COWSAY);
    other.add("jq", &jq("jq", &version, "/usr/bin/jq"));
    assert_eq!(other.expect(0, &["catalog", "image"]), first);
    // A second pin of jq: an error naming both tools.
    s.add("jq-old", &jq("jq-old", "1.5+dfsg-2", "/usr/bin/jq"));
    let o = s.run(&["catalog", "image"]);
    assert_eq!(o.status.code(), Some(2));
    said(
        &o,
        format!(
            "apt-package `jq` is pinned twice: {version} by tool `jq`, 1.5+dfsg-2 by tool `jq-old`"
        ),
    );
}

#[test]
fn the_listing_shows_pins_risk_network_and_state() {
    let s = Shelf::new();
    s.add("cowsay", COWSAY);
    s.add("sh", SH);
    let listing = s.expect(0, &["catalog", "list"]);
    assert_eq!(
        listing,
        "id      source       pin           risk  network  state\n\
         cowsay  npm-package  cowsay 1.6.0  low   none     shelved\n\
         sh      binary-path  -             low   none     shelved\n"
    );
}

#[test]
fn an_unreachable_store_costs_the_listing_the_catalogue_not_the_listing() {
    let s = Shelf::new();
    let o = s.run_env(
        &["tools"],
        &[("TOOLGATE_STORE_URL", "postgres://nobody@127.0.0.1:1/none")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("bash"), "{}", stdout(&o));
    said(
        &o,
        "warning: the catalogue's tools are not listed: cannot open the approval and audit store",
    );
}

#[test]
fn doctor_says_whether_the_catalogue_can_run_here_and_its_gates() {
    let s = Shelf::with_config("[catalog]\nexecute = \"approval\"\n");
    let doctor = s.json(0, &["doctor", "--json"]);
    assert_eq!(doctor["catalog"]["available"], true, "{doctor:#}");
    assert_eq!(doctor["catalog"]["execute"], "approval");
    let text = s.expect(0, &["doctor"]);
    assert!(
        text.contains("installs and runs its tools under bubblewrap; gates: install approval, execute approval"),
        "{text}"
    );
    s.write(
        "home/.config/toolgate/config.toml",
        "[sandbox]\nbackend = \"landlock\"\n",
    );
    let doctor = s.json(0, &["doctor", "--json"]);
    assert_eq!(doctor["catalog"]["available"], false, "{doctor:#}");
    assert!(
        doctor["catalog"]["runs"]
            .as_str()
            .unwrap()
            .starts_with("UNAVAILABLE"),
        "{doctor:#}"
    );
}
