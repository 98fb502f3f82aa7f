//! Through the real binary: a `bash` call that makes a repository and
//! plants `core.fsmonitor` and a hook in it leaves nothing that host git
//! runs, and the agent's result says what toolgate took out. Under
//! bubblewrap and landlock.

use std::process::Command;

use serde_json::json;

use super::{Sandbox, stdout};

#[test]
fn a_repository_a_bash_call_makes_is_neutralised_and_the_result_says_so() {
    use std::os::unix::fs::PermissionsExt;
    for backend in ["bwrap", "landlock"] {
        let s = Sandbox::new();
        // Outside the project: the command cannot touch either.
        let marker = s.dir.path().join("ran");
        let evil = s.write(
            "evil.sh",
            &format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
        );
        std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
        let evil = evil.display().to_string();
        let command = format!(
            "git init -q made && git -C made config core.fsmonitor '{evil}' && \
             printf '#!/bin/sh\\n%s\\n' '{evil}' > made/.git/hooks/post-checkout && \
             chmod +x made/.git/hooks/post-checkout"
        );
        let o = s.run_in(
            &s.project(),
            &["call", "bash", &json!({ "command": command }).to_string()],
            &[("TOOLGATE_SANDBOX_BACKEND", backend)],
        );
        assert_eq!(o.status.code(), Some(0), "{backend}: {o:?}");
        let out = stdout(&o);
        for part in [
            "removed `core.fsmonitor` from ",
            "made/.git/config",
            "made/.git/hooks/post-checkout",
        ] {
            assert!(out.contains(part), "{backend}: {part}: {out}");
        }
        let made = s.project().join("made");
        for args in [&["status"][..], &["checkout", "-q", "-b", "x"]] {
            let status = Command::new("git")
                .args(args)
                .current_dir(&made)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(status.status.success(), "{backend}: {status:?}");
        }
        assert!(!marker.exists(), "{backend}: the planted program ran");
    }
}
