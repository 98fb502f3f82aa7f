//! One cap for the output files of every background process of a toolgate server.
//!
//! Each process's log is bounded by itself, but an agent that starts process after
//! process (and a server with many agents) would still add up without end. Every log
//! takes a lease of this budget when it is made (its cap); once its process has ended
//! the lease shrinks to the file's size, and the file becomes evictable. When a new
//! log needs room, the oldest ended logs are removed first; when running processes
//! already hold the whole budget, the new log gets what is left, down to nothing, and
//! its results say so: a start is never refused for want of log space.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::log::{ProcessLog, Removed};

/// All the output files of one toolgate process together, by default.
pub const DEFAULT_LOGS_TOTAL_BYTES: u64 = 256 << 20;

/// The shared budget of log bytes (cloning shares it).
#[derive(Clone)]
pub struct LogBudget(Arc<Inner>);

struct Inner {
    total: u64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    leased: u64,
    /// Logs of ended processes, oldest first: removed first when room is needed.
    ended: VecDeque<Weak<ProcessLog>>,
}

impl LogBudget {
    /// A budget of `total` bytes of its own (for tests and embedders that run
    /// several independent servers in one process).
    pub fn new(total: u64) -> LogBudget {
        LogBudget(Arc::new(Inner {
            total,
            state: Mutex::new(State::default()),
        }))
    }

    /// The budget of this process: every table made with the default config shares it.
    pub fn server() -> LogBudget {
        static SERVER: OnceLock<LogBudget> = OnceLock::new();
        SERVER
            .get_or_init(|| LogBudget::new(DEFAULT_LOGS_TOTAL_BYTES))
            .clone()
    }

    /// The cap of all logs together, in bytes.
    pub fn total(&self) -> u64 {
        self.0.total
    }

    /// Bytes leased now.
    pub fn leased(&self) -> u64 {
        self.state().leased
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The counters stay consistent under a panic (single assignments).
        self.0
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Leases up to `want` bytes, removing ended logs (oldest first) while short;
    /// returns what was leased, which may be less than `want`, or zero.
    pub(crate) fn lease(&self, want: u64) -> u64 {
        loop {
            let victim = {
                let mut s = self.state();
                let free = self.0.total.saturating_sub(s.leased);
                if free >= want || s.ended.is_empty() {
                    let granted = want.min(free);
                    s.leased += granted;
                    return granted;
                }
                s.ended.pop_front()
            };
            // Outside the lock: removing a log gives its lease back through `release`.
            if let Some(log) = victim.and_then(|weak| weak.upgrade()) {
                log.remove(Removed::Evicted {
                    total: self.0.total,
                });
            }
        }
    }

    /// Adds `bytes` to the leases without a check: a finished log's marker line.
    pub(crate) fn grow(&self, bytes: u64) {
        self.state().leased += bytes;
    }

    pub(crate) fn release(&self, bytes: u64) {
        let mut s = self.state();
        s.leased = s.leased.saturating_sub(bytes);
    }

    /// `log`'s process has ended: its file may be removed for newer logs.
    pub(crate) fn ended(&self, log: &Arc<ProcessLog>) {
        let mut s = self.state();
        s.ended.retain(|weak| weak.strong_count() > 0);
        s.ended.push_back(Arc::downgrade(log));
    }
}

impl std::fmt::Debug for LogBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogBudget")
            .field("total", &self.0.total)
            .field("leased", &self.leased())
            .finish()
    }
}

/// Two budgets are equal when they are the same shared budget.
impl PartialEq for LogBudget {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LogBudget {}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn log_in(dir: &std::path::Path, name: &str, budget: &LogBudget, want: u64) -> Arc<ProcessLog> {
        let granted = budget.lease(want);
        let path = dir.join(name);
        let file = std::fs::File::create_new(&path).unwrap();
        Arc::new(ProcessLog::new(path, file, granted, 0, budget.clone()))
    }

    #[test]
    fn running_logs_get_what_is_left_and_ended_ones_make_room_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let budget = LogBudget::new(100);
        let first = log_in(dir.path(), "1.log", &budget, 40);
        let second = log_in(dir.path(), "2.log", &budget, 40);
        // Both still run: the third gets what is left, the fourth nothing at all.
        let third = log_in(dir.path(), "3.log", &budget, 40);
        let fourth = log_in(dir.path(), "4.log", &budget, 40);
        assert_eq!(
            [&first, &second, &third, &fourth].map(|l| l.caps().0),
            [40, 40, 20, 0]
        );
        // The first two end with 10 bytes each: their leases shrink to that.
        for log in [&first, &second] {
            log.write(b"0123456789");
            log.finish();
            budget.ended(log);
        }
        assert_eq!(budget.leased(), 10 + 10 + 20);
        // Room for 60 exists without removing anything; for 10 more the oldest goes.
        let fifth = log_in(dir.path(), "5.log", &budget, 60);
        assert_eq!(fifth.caps().0, 60);
        assert_eq!(first.removed(), None);
        let sixth = log_in(dir.path(), "6.log", &budget, 10);
        assert_eq!(sixth.caps().0, 10);
        assert_eq!(first.removed(), Some(Removed::Evicted { total: 100 }));
        assert!(!dir.path().join("1.log").exists());
        assert_eq!(second.removed(), None);
        assert_eq!(budget.leased(), 10 + 20 + 60 + 10);
        // Dropping a log gives its lease back.
        drop(sixth);
        assert_eq!(budget.leased(), 10 + 20 + 60);
    }
}
