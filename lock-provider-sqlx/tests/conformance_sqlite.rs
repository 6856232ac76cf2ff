//! Every function of `lock_core::testkit` on a SQLite file, through the service's sqlx pool,
//! each test on a file of its own.

mod common;

lock_core::conformance_tests!(common::sqlite_provider());
