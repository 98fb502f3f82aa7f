//! What every file tool shares: the workspace, the limits, and the one way
//! a path argument becomes a place in a jail.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_core::ToolError;
use toolgate_sandbox::{Jail, JailError, Workspace, WorkspaceError};

/// Caps of the file tools. The defaults fit inside the default
/// ResourcePolicy, so a tool's own continuation hint comes before the
/// pipeline would have to cut anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest file read, written or edited whole, in bytes.
    pub max_file_bytes: u64,
    /// Largest image returned as image content, in bytes.
    pub max_image_bytes: u64,
    /// Lines `read` shows per call by default.
    pub read_lines: usize,
    /// Bytes of text `read` shows per call at most.
    pub read_bytes: usize,
    /// Characters of one line shown before it is cut.
    pub line_chars: usize,
    /// Results `grep`, `find` and `ls` show per call by default.
    pub results: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::within(50_000, 2_000, 10 * 1024 * 1024)
    }
}

/// Lines and bytes kept free in a `read` page for its notes (line endings,
/// BOM, the continuation hint), so the page itself is never cut.
const NOTE_LINES: usize = 8;
const NOTE_BYTES: usize = 2_000;

impl Limits {
    /// Limits that fit a pipeline bounding results to `output_bytes` and
    /// `output_lines` (its ResourcePolicy), with files up to `file_bytes`.
    pub fn within(output_bytes: usize, output_lines: usize, file_bytes: u64) -> Limits {
        Limits {
            max_file_bytes: file_bytes,
            max_image_bytes: file_bytes.min(5 * 1024 * 1024),
            read_lines: output_lines.saturating_sub(NOTE_LINES).max(1),
            read_bytes: output_bytes.saturating_sub(NOTE_BYTES).max(1),
            line_chars: 2000,
            results: 200,
        }
    }

    /// Sets the largest file a tool reads or writes whole.
    pub fn max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }
}

/// The workspace and limits the file tools work with.
pub struct Fs {
    workspace: Arc<dyn Workspace>,
    limits: Limits,
}

/// A path argument resolved to a jail.
#[derive(Clone)]
pub(crate) struct Located {
    /// The jail of the root holding the path.
    pub jail: Arc<Jail>,
    /// The path relative to that root.
    pub rel: PathBuf,
    /// How the path is shown to the model: relative to the first root, or
    /// absolute when it lies in another root.
    pub shown: String,
}

impl Located {
    /// The same root, another path relative to it.
    pub fn sibling(&self, rel: PathBuf) -> Located {
        let shown = show(&self.jail, &rel, self.shown.starts_with('/'));
        Located {
            jail: self.jail.clone(),
            rel,
            shown,
        }
    }
}

impl Fs {
    /// File tools over `workspace`.
    pub fn new(workspace: Arc<dyn Workspace>, limits: Limits) -> Fs {
        Fs { workspace, limits }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The workspace.
    pub fn workspace(&self) -> &Arc<dyn Workspace> {
        &self.workspace
    }

    /// Resolves a path argument: relative paths against the workspace's
    /// working directory (never this process's), absolute ones must lie in
    /// a root. Escapes are refused here and again by the jail on every use.
    pub(crate) fn locate(&self, path: &str) -> Result<Located, ToolError> {
        let path = if path.is_empty() { "." } else { path };
        let (jail, rel) = self
            .workspace
            .jail_for(Path::new(path))
            .map_err(workspace_error)?;
        let first_root = self.workspace.roots().first().map(PathBuf::as_path);
        let absolute = first_root != Some(jail.root());
        let shown = show(&jail, &rel, absolute);
        Ok(Located { jail, rel, shown })
    }
}

fn show(jail: &Jail, rel: &Path, absolute: bool) -> String {
    if absolute {
        jail.root().join(rel).display().to_string()
    } else if rel.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        rel.display().to_string()
    }
}

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Failed(format!("internal error: {e}")))?
}

/// Runs short blocking file work (one directory listing, one page of one
/// file) without a trip through the blocking pool and back, whose two
/// thread wake-ups are the larger part of a small `read` or `ls`. On a
/// multi-thread runtime `block_in_place` first hands this worker's other
/// tasks to another thread, so none of them waits. On a current-thread
/// runtime (`toolgate mcp`, `toolgate call`) the work runs right here: the
/// runtime's other tasks wait for it as they would for any other step of
/// the call, and it is bounded (a page, a listing).
pub(crate) async fn blocking_short<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    let multi_thread = Handle::try_current()
        .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::MultiThread);
    // A panic stays a failed call, as it is through the blocking pool.
    let run = || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
            Err(ToolError::Failed(
                "internal error: the tool panicked".to_owned(),
            ))
        })
    };
    if multi_thread {
        tokio::task::block_in_place(run)
    } else {
        run()
    }
}

/// A jail error as the model sees it (its message says what to do next).
pub(crate) fn jail_error(e: JailError) -> ToolError {
    ToolError::Failed(e.to_string())
}

pub(crate) fn workspace_error(e: WorkspaceError) -> ToolError {
    match e {
        WorkspaceError::Jail(e) => jail_error(e),
        other => ToolError::Failed(other.to_string()),
    }
}

/// Seconds since the Unix epoch, for structured output.
pub(crate) fn unix_seconds(time: Option<std::time::SystemTime>) -> Option<u64> {
    time?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// `YYYY-MM-DD HH:MM` in UTC, for listings.
pub(crate) fn utc_minutes(secs: u64) -> String {
    UtcMinutes(secs).to_string()
}

/// Seconds since the Unix epoch shown as `YYYY-MM-DD HH:MM` in UTC; writes
/// into a listing without a String of its own.
pub(crate) struct UtcMinutes(pub u64);

impl UtcMinutes {
    /// Year, month, day, hour and minute.
    fn civil(&self) -> (i64, i64, i64, u64, u64) {
        let secs = self.0;
        let days = secs / 86_400;
        let rem = secs % 86_400;
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days as i64 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        (year, month, day, rem / 3600, rem % 3600 / 60)
    }

    /// Appends the time to `text`: what Display writes, digit by digit (a
    /// listing writes one per entry, and the formatting machinery's padded
    /// integers cost more than the whole row otherwise).
    pub(crate) fn push_to(&self, text: &mut String) {
        let (year, month, day, hour, minute) = self.civil();
        let Ok(year @ 0..=9999) = u64::try_from(year) else {
            // Writing to a String cannot fail.
            let _ = write!(text, "{self}");
            return;
        };
        let mut out = *b"0000-00-00 00:00";
        let digits = |out: &mut [u8], mut n: u64| {
            for place in out.iter_mut().rev() {
                *place = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        digits(&mut out[0..4], year);
        digits(&mut out[5..7], month.unsigned_abs());
        digits(&mut out[8..10], day.unsigned_abs());
        digits(&mut out[11..13], hour);
        digits(&mut out[14..16], minute);
        // Only ASCII digits and separators were written.
        text.extend(out.iter().map(|&b| char::from(b)));
    }
}

impl std::fmt::Display for UtcMinutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (year, month, day, hour, minute) = self.civil();
        write!(f, "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}")
    }
}

/// A byte count for people: `812 B`, `4.0 KiB`, `12.3 MiB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    HumanBytes(bytes).to_string()
}

/// [`human_bytes`] as a Display, for writing straight into a listing.
pub(crate) struct HumanBytes(pub u64);

impl HumanBytes {
    /// Appends the size to `text`; under a KiB (most files of a source
    /// tree) digit by digit, without the formatting machinery.
    pub(crate) fn push_to(&self, text: &mut String) {
        let bytes = self.0;
        if bytes >= 1024 {
            // Writing to a String cannot fail.
            let _ = write!(text, "{self}");
            return;
        }
        text.push_str(decimal(bytes, &mut [0; 20]));
        text.push_str(" B");
    }
}

/// `n` in decimal, written at the end of `buffer`, without the formatting
/// machinery (a listing or a page writes one per row).
pub(crate) fn decimal(mut n: u64, buffer: &mut [u8; 20]) -> &str {
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buffer[at..]).unwrap_or("?")
}

impl std::fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
        let bytes = self.0;
        if bytes < 1024 {
            return write!(f, "{bytes} B");
        }
        let mut value = bytes as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        write!(f, "{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_sizes_read_well() {
        assert_eq!(utc_minutes(0), "1970-01-01 00:00");
        assert_eq!(utc_minutes(951_782_400), "2000-02-29 00:00");
        assert_eq!(utc_minutes(1_796_130_060), "2026-12-01 13:01");
        assert_eq!(human_bytes(812), "812 B");
        assert_eq!(human_bytes(4096), "4.0 KiB");
        assert_eq!(human_bytes(12_900_000), "12.3 MiB");
    }

    /// What a listing writes digit by digit is what Display writes.
    #[test]
    fn pushed_dates_and_sizes_match_display() {
        let times = [
            0,
            59,
            951_782_400,
            1_796_130_060,
            253_402_300_799, // 9999-12-31 23:59:59
            253_402_300_800, // 10000-01-01: wider than four digits
            u64::MAX,
        ];
        for secs in times {
            let mut pushed = String::from("x");
            UtcMinutes(secs).push_to(&mut pushed);
            assert_eq!(pushed, format!("x{}", UtcMinutes(secs)), "{secs}");
        }
        for bytes in [
            0,
            1,
            9,
            10,
            99,
            100,
            812,
            999,
            1000,
            1023,
            1024,
            4096,
            u64::MAX,
        ] {
            let mut pushed = String::from("x");
            HumanBytes(bytes).push_to(&mut pushed);
            assert_eq!(pushed, format!("x{}", HumanBytes(bytes)), "{bytes}");
        }
    }
}
