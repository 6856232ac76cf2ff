//! Cross-crate benchmarks; see `benches/` and BENCHMARKS.md.
