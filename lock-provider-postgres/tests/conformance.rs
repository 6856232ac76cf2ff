//! The provider passes every function of `lock_core::testkit` against the real PostgreSQL.

mod common;

lock_core::conformance_tests!(common::provider(common::CONFORMANCE_TABLE));
