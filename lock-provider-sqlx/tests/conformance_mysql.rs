//! Every function of `lock_core::testkit` against MySQL/MariaDB, through the service's sqlx pool.

mod common;

lock_core::conformance_tests!(common::mysql_provider(common::MYSQL_CONFORMANCE_TABLE));
