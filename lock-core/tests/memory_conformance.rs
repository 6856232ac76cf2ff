//! The in-memory provider passes every function of the conformance suite.

use lock_core::InMemoryLockProvider;

lock_core::conformance_tests!(async { Some(InMemoryLockProvider::new()) });
