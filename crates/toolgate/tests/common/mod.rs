//! The `toolgate` binary as the tests run it.

use std::path::Path;
use std::process::Command;

/// `toolgate` in `cwd` with nothing of the host's environment but PATH, and
/// a home of its own (`base/home`, its config under `base/home/.config`).
pub fn toolgate(base: &Path, cwd: &Path) -> Command {
    toolgate_at(Path::new(env!("CARGO_BIN_EXE_toolgate")), base, cwd)
}

/// Like [`toolgate`], with the toolgate binary at `binary` (a link to the
/// built one placed elsewhere).
pub fn toolgate_at(binary: &Path, base: &Path, cwd: &Path) -> Command {
    let mut cmd = Command::new(binary);
    cmd.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", base.join("home"))
        .env("XDG_CONFIG_HOME", base.join("home/.config"));
    cmd
}

/// `toolgate trust FILE` in `base`'s home: the user trusts a project file
/// the test wrote, so that its loosening settings apply as written.
#[allow(dead_code)] // Not every test binary writes a loosening project file.
pub fn trust(base: &Path, file: &Path) {
    let o = toolgate(base, file.parent().unwrap_or(base))
        .arg("trust")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "toolgate trust {}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A running `toolgate serve`, killed when dropped.
#[allow(dead_code)] // Not every test binary serves HTTP.
pub struct Served {
    /// The server process.
    pub child: std::process::Child,
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// Everything the server wrote to stderr so far.
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

#[allow(dead_code)]
impl Served {
    /// Starts `cmd` (a `toolgate ... serve --port 0 ...` command) and waits
    /// until it listens.
    pub fn start(mut cmd: Command) -> std::io::Result<Served> {
        use std::io::BufRead;
        let mut child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (sender, receiver) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().ok_or(std::io::ErrorKind::BrokenPipe)?;
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                // Kept before the URL is announced, so stderr() has the line
                // as soon as start() returns.
                if let Ok(mut all) = sink.lock() {
                    all.push_str(&line);
                    all.push('\n');
                }
                if let Some(rest) = line.split("serving MCP at ").nth(1) {
                    let url = rest.split_whitespace().next().unwrap_or_default();
                    let _ = sender.send(url.to_owned());
                }
            }
        });
        match receiver.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(url) => Ok(Served { child, url, stderr }),
            Err(_) => {
                let _ = child.kill();
                let said = stderr.lock().map(|s| s.clone()).unwrap_or_default();
                Err(std::io::Error::other(format!(
                    "toolgate serve did not start listening:\n{said}"
                )))
            }
        }
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
