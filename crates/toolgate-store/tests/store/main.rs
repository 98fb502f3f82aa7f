//! The store's black-box suite: every case runs against SQLite (a file in a
//! temp dir with a space in its path) and PostgreSQL (a fresh database on
//! the server `TOOLGATE_TEST_POSTGRES_URL` names; scripts/test starts a
//! throwaway cluster and sets it). Without that variable the PostgreSQL
//! cases fail and say how to start one: they never skip.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod audit;
mod catalog;
mod common;
mod concurrency;
mod gate;
mod pins;
mod processes;
