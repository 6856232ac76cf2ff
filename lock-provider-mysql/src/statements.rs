//! The statements the provider runs: their SQL text, the order of their parameters and the
//! decoding of the acquire's OK packet are the provider kit's
//! ([`lock_sql::sql::mysql`], shared with every other MySQL driver's provider); what is
//! mysql_async's is the parameter and row types.

use chrono::NaiveDateTime;
use lock_sql::sql::SqlValue;
use mysql_async::{Params, Value};

pub(crate) use lock_sql::sql::mysql::{NOW_PRECISE, Statements};

/// The kit's parameters as mysql_async's positional parameters.
pub(crate) fn params(values: Vec<SqlValue>) -> Params {
    Params::Positional(
        values
            .into_iter()
            .map(|value| match value {
                SqlValue::Text(text) => Value::from(text),
                SqlValue::Int(int) => Value::Int(int),
                SqlValue::Timestamp(at) => Value::from(at),
            })
            .collect(),
    )
}

/// One row of `list` or `select_for_unlock`.
pub(crate) type RecordRow = (
    String,
    NaiveDateTime,
    NaiveDateTime,
    String,
    i64,
    Option<NaiveDateTime>,
    bool,
);
