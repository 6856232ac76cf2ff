//! Every function of `lock_core::testkit` against the MySQL/MariaDB server.

mod common;

lock_core::conformance_tests!(common::provider());
