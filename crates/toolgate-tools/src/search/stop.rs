//! When a search gives up: after a time limit, or as soon as its caller is
//! gone.
//!
//! Attack: a `grep` or `find` over a tree of millions of files (or one the
//! agent's own command keeps growing) runs on a blocking thread of the
//! server. A client that cancels the call, or gives up on it, only drops
//! the call's future; without a stop the walk goes on to the end, and a few
//! such calls hold every core of the server. So every search checks a
//! [`Stop`] between files and between the reads of a file, and answers with
//! what it found so far, saying that it stopped and why.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// How long one `grep` or `find` call may search. Ripgrep over a large
/// monorepo with a cold cache takes seconds; a minute is far past any
/// search worth waiting for, and within the minute most clients wait.
pub const SEARCH_TIME_LIMIT: Duration = Duration::from_secs(60);

/// Why a search ended before it had looked everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// It ran for its whole time limit.
    TimeLimit,
    /// Its caller went away (the call was cancelled).
    Cancelled,
}

/// A search's deadline and its cancellation flag.
#[derive(Debug, Clone)]
pub struct Stop {
    started: Instant,
    limit: Duration,
    cancelled: Arc<AtomicBool>,
    /// Set once the deadline has been seen, so that later checks are one
    /// load instead of a clock read.
    expired: Arc<AtomicBool>,
}

impl Default for Stop {
    fn default() -> Stop {
        Stop::after(SEARCH_TIME_LIMIT)
    }
}

impl Stop {
    /// A stop `limit` from now.
    pub fn after(limit: Duration) -> Stop {
        Stop {
            started: Instant::now(),
            limit,
            cancelled: Arc::new(AtomicBool::new(false)),
            expired: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The time limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Stops the search (from any thread).
    pub fn cancel(&self) {
        self.cancelled.store(true, Relaxed);
    }

    /// A guard that cancels the search when it is dropped: held by the
    /// call's future, so that a dropped call stops its blocking search.
    #[must_use]
    pub fn cancel_on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }

    /// Whether the search must end now, and why.
    pub fn reached(&self) -> Option<Stopped> {
        if self.cancelled.load(Relaxed) {
            return Some(Stopped::Cancelled);
        }
        if self.expired.load(Relaxed) {
            return Some(Stopped::TimeLimit);
        }
        if self.started.elapsed() >= self.limit {
            self.expired.store(true, Relaxed);
            return Some(Stopped::TimeLimit);
        }
        None
    }

    /// `reader`, which ends (with an error) once the search must stop, so
    /// that one huge file cannot outlast the limit.
    pub fn reader<R: io::Read>(&self, reader: R) -> StopReader<'_, R> {
        StopReader { stop: self, reader }
    }

    /// The sentence a report ends with when the search stopped early.
    pub fn describe(&self, stopped: Stopped) -> String {
        match stopped {
            Stopped::TimeLimit => format!(
                "the search stopped after its time limit of {} s, so these results are \
                 partial; narrow it with path, include or types",
                self.limit.as_secs()
            ),
            Stopped::Cancelled => "the search was cancelled; these results are partial".into(),
        }
    }
}

/// See [`Stop::cancel_on_drop`].
#[derive(Debug)]
pub struct CancelOnDrop(Stop);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// See [`Stop::reader`].
pub struct StopReader<'a, R> {
    stop: &'a Stop,
    reader: R,
}

impl<R: io::Read> io::Read for StopReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Not `Interrupted`: readers retry that one.
        if let Some(stopped) = self.stop.reached() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{stopped:?}"),
            ));
        }
        self.reader.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_dropped_guard_cancels_and_a_zero_limit_has_expired() {
        let stop = Stop::after(Duration::from_secs(3600));
        assert_eq!(stop.reached(), None);
        drop(stop.cancel_on_drop());
        assert_eq!(stop.reached(), Some(Stopped::Cancelled));
        assert_eq!(
            Stop::after(Duration::ZERO).reached(),
            Some(Stopped::TimeLimit)
        );
    }

    #[test]
    fn the_reader_ends_once_stopped() {
        let stop = Stop::after(Duration::from_secs(3600));
        let data = [b'x'; 10];
        let mut reader = stop.reader(&data[..]);
        let mut buf = [0u8; 4];
        assert_eq!(reader.read(&mut buf).ok(), Some(4));
        stop.cancel();
        assert!(reader.read(&mut buf).is_err());
    }
}
