//! The statements the provider runs: their SQL text is the provider kit's
//! ([`lock_core::kit::sql::sqlite`], shared with every other SQLite driver's provider).

pub(crate) use lock_core::kit::sql::sqlite::{Statements, slot_text};
