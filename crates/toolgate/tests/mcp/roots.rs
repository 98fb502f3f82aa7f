//! Client roots narrow toolgate's roots and never widen them. On 2025-11-25
//! toolgate asks with roots/list; on 2026-07-28 with an InputRequired
//! result that the SDK answers from the same callback.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::http::{http_config, serve};
use crate::{Mode, Project, file_uri, scenario, text};

const NO_CLIENT_ROOT: &str = "none of the client's roots lies inside toolgate's roots";

/// Attack: a client narrows toolgate to a subdirectory, and a call (a
/// prompt-injected model) then reads or writes beside it in the operator's
/// root. Only the subdirectory may be reachable, by tools and by bash.
fn a_client_root_inside_narrows_every_tool(mode: Mode, over_http: bool) {
    let p = Project::new();
    let inside = p.write("sub/inside.txt", "inside text\n");
    let top = p.write("top.txt", "top secret\n");
    let sub = p.root().join("sub");
    let root = p.root();
    // Over HTTP a 2025-11-25 session is asked with roots/list on its SSE
    // stream and gets a scope of its own; a 2026-07-28 request is asked again
    // on every call (no session to remember them in).
    let served;
    let mut config = if over_http {
        served = serve(&p, &[("TOOLGATE_TOKEN", "roots-token")]);
        http_config(&served, mode, Some("roots-token"))
    } else {
        p.stdio(mode, &[])
    };
    config["roots"] = json!([file_uri(&sub)]);
    config["calls"] = json!([
        ["read", {"path": inside}],
        ["read", {"path": top}],
        ["write", {"path": root.join("written.txt"), "content": "x\n"}],
        // Commands run in the client's root…
        ["bash", {"command": "pwd; echo made > made.txt"}],
        // …and cannot reach beside it, relatively or absolutely.
        ["bash", {"command": "echo x > ../outside.txt"}],
        ["bash", {"command": format!("echo x > {}/outside2.txt", root.display())}],
        ["bash", {"command": "cat ../top.txt"}],
    ]);
    let observed = scenario(p.base(), "roots", &config);
    let results = observed["results"].as_array().unwrap();
    let [read_in, read_top, write_top, bash_in, up, absolute, cat_top] = results.as_slice() else {
        panic!("expected 7 results: {observed}");
    };

    assert_eq!(read_in["is_error"], false, "{observed}");
    assert!(text(read_in).contains("inside text"), "{read_in}");
    for refused in [read_top, write_top] {
        assert_eq!(refused["is_error"], true, "{refused}");
        assert!(
            text(refused).starts_with("denied by the paths policy: "),
            "{refused}"
        );
    }
    assert_eq!(bash_in["is_error"], false, "{bash_in}");
    assert!(
        text(bash_in).starts_with(&format!("{}\n", sub.display())),
        "{bash_in}"
    );
    assert_eq!(
        std::fs::read_to_string(sub.join("made.txt")).unwrap(),
        "made\n"
    );
    // Beside the client's root there is nothing of the host's to read. A
    // write there fails, or (when the project lies under /tmp, which is
    // the sandbox's own tmpfs) lands in the sandbox's throwaway /tmp: what
    // counts is that the host beside the root is unchanged, checked below.
    for escape in [up, absolute] {
        assert!(
            escape["is_error"] == true
                || escape["structured"]["exit_code"] != 0
                || root.starts_with(std::env::temp_dir()),
            "{escape}"
        );
    }
    assert!(
        cat_top["is_error"] == true || cat_top["structured"]["exit_code"] != 0,
        "{cat_top}"
    );
    assert!(!text(cat_top).contains("top secret"), "{cat_top}");
    // Nothing beside the client's root changed.
    let mut beside: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(beside, ["sub", "top.txt"]);
    assert_eq!(std::fs::read_to_string(&top).unwrap(), "top secret\n");
}

#[test]
fn a_client_root_inside_narrows_every_tool_legacy() {
    a_client_root_inside_narrows_every_tool(Mode::Legacy, false);
}

#[test]
fn a_client_root_inside_narrows_every_tool_auto() {
    a_client_root_inside_narrows_every_tool(Mode::Auto, false);
}

/// Checks that every call was refused for want of a usable client root,
/// that the refusal was logged on stderr and as an MCP log message, and
/// that `secret` never showed.
#[test]
fn a_client_root_inside_narrows_every_tool_over_http_legacy() {
    a_client_root_inside_narrows_every_tool(Mode::Legacy, true);
}

#[test]
fn a_client_root_inside_narrows_every_tool_over_http_auto() {
    a_client_root_inside_narrows_every_tool(Mode::Auto, true);
}

fn check_unusable(observed: &Value, secret: &str) {
    for result in observed["results"].as_array().unwrap() {
        assert_eq!(result["is_error"], true, "{result}");
        assert!(text(result).contains(NO_CLIENT_ROOT), "{result}");
        assert!(!text(result).contains(secret), "{result}");
    }
    let stderr = observed["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("client root file://") && stderr.contains("refused"),
        "{stderr}"
    );
    let logged = observed["logs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["level"] == "warning" && l["data"].to_string().contains("refused"));
    assert!(logged, "no MCP log message about the refusal: {observed}");
}

/// Attack: a client offers a root outside toolgate's, hoping toolgate
/// widens its reach to it. No call may run, and the outside file stays
/// unread.
fn a_client_root_outside_is_refused(mode: Mode) {
    let p = Project::new();
    p.write("top.txt", "top\n");
    let other = p.base().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secret.txt"), "outside secret\n").unwrap();
    let mut config = p.stdio(mode, &[]);
    config["roots"] = json!([file_uri(&other)]);
    config["calls"] = json!([
        ["read", {"path": other.join("secret.txt")}],
        ["read", {"path": p.root().join("top.txt")}],
        ["bash", {"command": format!("cat {}/secret.txt", other.display())}],
    ]);
    let observed = scenario(p.base(), "roots", &config);
    check_unusable(&observed, "outside secret");
}

#[test]
fn a_client_root_outside_is_refused_legacy() {
    a_client_root_outside_is_refused(Mode::Legacy);
}

#[test]
fn a_client_root_outside_is_refused_auto() {
    a_client_root_outside_is_refused(Mode::Auto);
}

/// Attack: the client root is a symlink inside toolgate's root that leads
/// outside it; judged by its name it would pass.
fn a_client_root_symlinked_outside_is_refused(mode: Mode) {
    let p = Project::new();
    let other = p.base().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secret.txt"), "outside secret\n").unwrap();
    let link = p.root().join("link");
    std::os::unix::fs::symlink(&other, &link).unwrap();
    let mut config = p.stdio(mode, &[]);
    config["roots"] = json!([file_uri(&link)]);
    config["calls"] = json!([
        ["read", {"path": link.join("secret.txt")}],
        ["bash", {"command": "cat link/secret.txt"}],
    ]);
    let observed = scenario(p.base(), "roots", &config);
    check_unusable(&observed, "outside secret");
}

#[test]
fn a_client_root_symlinked_outside_is_refused_legacy() {
    a_client_root_symlinked_outside_is_refused(Mode::Legacy);
}

#[test]
fn a_client_root_symlinked_outside_is_refused_auto() {
    a_client_root_symlinked_outside_is_refused(Mode::Auto);
}
