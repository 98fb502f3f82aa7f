//! The `toolgate` binary as the tests run it.

use std::path::Path;
use std::process::Command;

/// `toolgate` in `cwd` with nothing of the host's environment but PATH, and
/// a home of its own (`base/home`, its config under `base/home/.config`).
pub fn toolgate(base: &Path, cwd: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", base.join("home"))
        .env("XDG_CONFIG_HOME", base.join("home/.config"));
    cmd
}
