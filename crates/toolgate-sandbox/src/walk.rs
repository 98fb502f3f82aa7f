//! Walking a tree of directories on a few threads: the walk of a root for
//! repositories ([`crate::repos`]) and the scan of /etc and /opt for
//! private files (`plan::private`) are both bound by syscalls (a listing,
//! a `statx` per entry), which run in parallel on every core.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

/// The threads a walk uses: one per core, at most eight (more gained
/// nothing measurable, see benches/nested_scan.rs). Read once: each
/// reading looks at the process's cgroup files.
pub(crate) fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
}

/// A walk stopped by its visitor (too large, or a watch refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

/// Visits `start` and every item `visit` returns for it, on `threads`
/// threads (on this one alone when `threads` is 1): `visit` handles one
/// item, gathering what it found into its thread's `A`, and returns the
/// items to visit next. Returns each thread's `A` once no item is left, or
/// [`Stopped`] as soon as a visit did (the others stop at their next item).
pub(crate) fn parallel<I, A, F>(start: Vec<I>, threads: usize, visit: F) -> Result<Vec<A>, Stopped>
where
    I: Send,
    A: Default + Send,
    F: Fn(I, &mut A) -> Result<Vec<I>, Stopped> + Sync,
{
    if threads <= 1 {
        let mut found = A::default();
        let mut pending = start;
        while let Some(item) = pending.pop() {
            pending.extend(visit(item, &mut found)?);
        }
        return Ok(vec![found]);
    }
    /// Items still to visit and how many are taken but not finished.
    struct Work<I> {
        queue: Vec<I>,
        in_flight: usize,
    }
    let work = Mutex::new(Work {
        in_flight: start.len(),
        queue: start,
    });
    let wake = Condvar::new();
    let stopped = AtomicBool::new(false);
    let stop = || stopped.store(true, Ordering::SeqCst);
    let worker = || -> A {
        let mut found = A::default();
        loop {
            let item = {
                let Ok(mut guard) = work.lock() else {
                    stop();
                    return found;
                };
                loop {
                    if stopped.load(Ordering::SeqCst) {
                        return found;
                    }
                    if let Some(next) = guard.queue.pop() {
                        break next;
                    }
                    if guard.in_flight == 0 {
                        return found;
                    }
                    guard = match wake.wait(guard) {
                        Ok(guard) => guard,
                        Err(_) => {
                            stop();
                            return found;
                        }
                    };
                }
            };
            let next = visit(item, &mut found).unwrap_or_else(|Stopped| {
                stop();
                Vec::new()
            });
            let Ok(mut guard) = work.lock() else {
                stop();
                return found;
            };
            guard.in_flight = guard.in_flight + next.len() - 1;
            guard.queue.extend(next);
            drop(guard);
            wake.notify_all();
        }
    };
    let found: Vec<A> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(worker)).collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    stop();
                    A::default()
                })
            })
            .collect()
    });
    if stopped.load(Ordering::SeqCst) {
        return Err(Stopped);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree of numbers: n's children are 2n+1 and 2n+2 below `limit`.
    fn children(n: u32, limit: u32) -> Vec<u32> {
        [2 * n + 1, 2 * n + 2]
            .into_iter()
            .filter(|c| *c < limit)
            .collect()
    }

    #[test]
    fn every_item_is_visited_once_on_any_number_of_threads() {
        for threads in [1, 2, 4] {
            let found = parallel(vec![0u32], threads, |n, seen: &mut Vec<u32>| {
                seen.push(n);
                Ok(children(n, 1000))
            })
            .unwrap();
            let mut all: Vec<u32> = found.into_iter().flatten().collect();
            all.sort_unstable();
            assert_eq!(all, (0..1000).collect::<Vec<_>>(), "{threads} threads");
        }
    }

    #[test]
    fn a_visit_that_stops_stops_the_walk() {
        for threads in [1, 2, 4] {
            let outcome = parallel(vec![0u32], threads, |n, _: &mut ()| {
                if n == 500 {
                    return Err(Stopped);
                }
                Ok(children(n, 1000))
            });
            assert_eq!(outcome, Err(Stopped), "{threads} threads");
        }
    }
}
