//! Attack on the command allowlist through `PATH`: a bare listed name means
//! the system's program, so a `PATH` that puts a directory the agent writes
//! (a root, the sandbox's /tmp) first must not let a planted program answer
//! to it. Each planted program would leave a marker in the project.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::Project;
use crate::raw::RawStdio;

const MARKER: &str = "planted-program-ran";

#[test]
fn a_path_through_writable_directories_does_not_shadow_a_listed_name() {
    let p = Project::new();
    let planted = p.write("bin/ls", format!("#!/bin/sh\ntouch {MARKER}\n"));
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut raw = RawStdio::start(p.toolgate(&["mcp", "--allow-commands", "ls,printf,chmod"]));
    let in_root = format!("{}:/usr/bin:/bin", p.root().join("bin").display());
    let attacks = [
        // The call's own PATH, naming a directory in the root.
        json!({"command": "ls", "env": {"PATH": in_root}}),
        // The sandbox's scratch /tmp, written by the script itself.
        json!({
            "command": format!(
                "printf '#!/bin/sh\\ntouch {MARKER}\\n' > /tmp/ls; chmod +x /tmp/ls; ls"
            ),
            "env": {"PATH": "/tmp:/usr/bin:/bin"}
        }),
    ];
    for arguments in attacks {
        let response = raw.request(
            "tools/call",
            json!({"name": "bash", "arguments": arguments}),
        );
        assert!(
            !p.root().join(MARKER).exists(),
            "the planted ls ran: {arguments} -> {response}"
        );
        // The system's ls ran instead.
        let text = response["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("bin"), "{arguments} -> {response}");
    }
}
