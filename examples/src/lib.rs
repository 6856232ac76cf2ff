//! Runnable example programs; see `src/bin`:
//!
//! - `cluster_demo`: several instances of one service on one lock table, each job once per slot
//!   (`cargo run -p examples --bin cluster_demo`).
//! - `quickstart`: one annotated service on SQLite, as in the README
//!   (`cargo run -p examples --bin quickstart`).
