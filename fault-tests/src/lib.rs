//! Fault tests across real processes; see `tests/` and `src/bin`.
