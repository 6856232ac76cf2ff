//! Every function of `lock_core::testkit` against PostgreSQL, through the service's sqlx pool.

mod common;

lock_core::conformance_tests!(common::pg_provider(common::PG_CONFORMANCE_TABLE));
