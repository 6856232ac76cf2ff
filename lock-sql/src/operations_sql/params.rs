//! A manual run's parameters as the control and history tables keep them: the text of
//! `Params::encode` in a `params` column, NULL (or empty) for none.
//!
//! Decisions, and why:
//! - **None is NULL**: a row without parameters (every fire but a manual one with them, and
//!   every row from before the column) costs nothing; `''` is read as none too, since that
//!   is what `Params::encode` writes for none.
//! - **A text that does not decode fails the read, naming the row**: parameters are what a
//!   body acts on (the day to rebuild, a dry-run flag), so a trigger read without them, or
//!   with some of them, would run something the operator did not ask for, and a history row
//!   would show what did not run. The stores only write the `encode` of checked parameters:
//!   such a text was written by hand or by a version with wider rules, and the error names
//!   the table's row to fix or delete.

use std::fmt;

use lock_cluster::RunLog;
use lock_core::{BoxError, Params};

use super::OperationsSql;

/// A `params` (or `logs`) column whose text does not decode: which table's row, and why.
///
/// ```
/// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
/// let table = LockTableConfig::default().resolve(IdentifierStyle::POSTGRES)?;
/// let sql = OperationsSql::new(SqlDialect::Postgres, &table)?;
/// assert!(sql.run_params(7, None).unwrap().is_empty());
/// let error = sql.control_params(9, Some("bad key=x")).unwrap_err();
/// assert!(error.to_string().starts_with("the params of row 9 of shedlock_control"), "{error}");
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Debug)]
pub struct StoredParamsError {
    column: &'static str,
    table: String,
    id: i64,
    source: BoxError,
}

impl fmt::Display for StoredParamsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {} of row {} of {} do not decode ({}): fix or delete the row",
            self.column, self.id, self.table, self.source
        )
    }
}

impl std::error::Error for StoredParamsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

impl OperationsSql {
    /// The parameters of history row `id`, from its `params` column (NULL or `''`: none).
    pub fn run_params(&self, id: i64, stored: Option<&str>) -> Result<Params, StoredParamsError> {
        decode(&self.tables.runs, id, stored)
    }

    /// The log lines of history row `id`, from its `logs` column (NULL or `''`: none); a
    /// text that does not parse names the row, as parameters do.
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// let table = LockTableConfig::default().resolve(IdentifierStyle::POSTGRES)?;
    /// let sql = OperationsSql::new(SqlDialect::Postgres, &table)?;
    /// assert!(sql.run_log(7, None).unwrap().is_none());
    /// let error = sql.run_log(9, Some("garbage".into())).unwrap_err();
    /// assert!(error.to_string().starts_with("the logs of row 9 of shedlock_runs"), "{error}");
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn run_log(
        &self,
        id: i64,
        stored: Option<String>,
    ) -> Result<Option<RunLog>, StoredParamsError> {
        match stored {
            None => Ok(None),
            Some(text) if text.is_empty() => Ok(None),
            Some(text) => RunLog::from_stored(text)
                .map(Some)
                .map_err(|source| StoredParamsError {
                    column: "logs",
                    table: self.tables.runs.clone(),
                    id,
                    source: source.into(),
                }),
        }
    }

    /// The parameters of control row `id`, from its `params` column (NULL or `''`: none).
    pub fn control_params(
        &self,
        id: i64,
        stored: Option<&str>,
    ) -> Result<Params, StoredParamsError> {
        decode(&self.tables.control, id, stored)
    }
}

fn decode(table: &str, id: i64, stored: Option<&str>) -> Result<Params, StoredParamsError> {
    match stored {
        None | Some("") => Ok(Params::new()),
        Some(text) => Params::decode(text).map_err(|source| StoredParamsError {
            column: "params",
            table: table.to_owned(),
            id,
            source: source.into(),
        }),
    }
}

/// The text a `params` column stores for `params`: NULL for none.
pub fn stored_params(params: &Params) -> Option<String> {
    (!params.is_empty()).then(|| params.encode())
}
