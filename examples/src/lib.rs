//! Runnable example programs; see `src/bin`:
//!
//! - `cluster_demo`: several instances of one service on one lock table, each job once per slot
//!   (`cargo run -p examples --bin cluster_demo`).
//! - `quickstart`: one annotated service on SQLite (`cargo run -p examples --bin quickstart`).
//! - `metrics_prometheus`: the `metrics` feature exported for Prometheus
//!   (`cargo run -p examples --bin metrics_prometheus -- --seconds 10`).
//! - `axum_service`: an axum service and the scheduler stopped by one SIGTERM, as on Kubernetes
//!   (`cargo run -p examples --bin axum_service -- --database-url postgres://...`).
//! - `service`: the complete service on `scheduled-locks` alone: its own sqlx pool, jobs taking
//!   `State` and `JobContext`, a run-once migration before the first fire, the dashboard under
//!   `/ops`, `/metrics`, SIGTERM (`cargo run -p examples --bin service -- --database-url
//!   postgres://...`).
//!
//! The workspace README and the book are doc-tested by `scheduled-locks` (its `src/lib.rs`).
