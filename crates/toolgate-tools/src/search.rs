//! The search engines behind `grep` and `find`: ripgrep's crates (ignore,
//! grep-searcher, grep-regex) and globset over a jailed root. The walk is
//! parallel and .gitignore-aware; every file searched is opened through the
//! jail, so a path swapped for an escaping symlink mid-walk is refused.

pub mod find;
pub mod grep;
pub mod limits;
pub mod stop;
pub mod walk;
