//! Runnable example programs; see `src/bin`.
