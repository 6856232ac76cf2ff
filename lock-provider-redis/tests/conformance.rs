//! Every function of `lock_core::testkit` against the Redis server.

mod common;

lock_core::conformance_tests!(common::provider());
