//! Which table and columns the provider uses, checked once before any SQL is built.

use lock_core::{ColumnNames, DEFAULT_TABLE, LockError, validate_table_name};

/// The lock table's name and column names.
///
/// The table may be schema-qualified (`ops.shedlock`). Every name must be a plain identifier
/// (ASCII letters, digits and `_`); [`validate`](Self::validate) refuses anything else, so no
/// SQL is ever built from an unchecked string. Names are folded to lower case, exactly as
/// PostgreSQL folds the unquoted names of ShedLock's own DDL, and then double-quoted, so a
/// reserved word such as `user` works as a column name.
///
/// ```
/// use lock_provider_postgres::LockTableConfig;
///
/// let config = LockTableConfig { table: "ops.shedlock".into(), ..LockTableConfig::default() };
/// assert!(config.validate().is_ok());
/// let bad = LockTableConfig { table: "shedlock; DROP TABLE users".into(), ..LockTableConfig::default() };
/// assert!(bad.validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockTableConfig {
    /// `table` or `schema.table`; `shedlock` by default.
    pub table: String,
    /// The six column names; ShedLock's four and `fence`, `last_fire` by default.
    pub columns: ColumnNames,
}

impl Default for LockTableConfig {
    fn default() -> Self {
        LockTableConfig {
            table: DEFAULT_TABLE.to_owned(),
            columns: ColumnNames::default(),
        }
    }
}

impl LockTableConfig {
    /// Checks the table and column names; the error says which name is wrong and why.
    ///
    /// ```
    /// use lock_core::ColumnNames;
    /// use lock_provider_postgres::LockTableConfig;
    ///
    /// let config = LockTableConfig {
    ///     columns: ColumnNames { fence: "name".into(), ..ColumnNames::default() },
    ///     ..LockTableConfig::default()
    /// };
    /// assert!(config.validate().unwrap_err().to_string().contains("both named"));
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        validate_table_name(&self.table)?;
        self.columns.validate()
    }

    /// Validates and turns the names into the quoted SQL fragments the statements use.
    pub(crate) fn resolve(&self) -> Result<ResolvedTable, LockError> {
        let (schema, table) = validate_table_name(&self.table)?;
        self.columns.validate()?;
        let schema = schema.map(str::to_ascii_lowercase);
        let table = table.to_ascii_lowercase();
        let qualified = match &schema {
            Some(schema) => format!("{}.{}", quote(schema), quote(&table)),
            None => quote(&table),
        };
        let display = match &schema {
            Some(schema) => format!("{schema}.{table}"),
            None => table,
        };
        let c = &self.columns;
        let column = |name: &str| Column::new(name);
        Ok(ResolvedTable {
            display,
            qualified,
            name: column(&c.name),
            lock_until: column(&c.lock_until),
            locked_at: column(&c.locked_at),
            locked_by: column(&c.locked_by),
            fence: column(&c.fence),
            last_fire: column(&c.last_fire),
        })
    }
}

/// A validated table: every name already checked, folded and quoted.
#[derive(Clone, Debug)]
pub(crate) struct ResolvedTable {
    /// `schema.table` or `table`, lower case, for messages.
    pub(crate) display: String,
    /// The quoted, possibly schema-qualified name for SQL.
    pub(crate) qualified: String,
    pub(crate) name: Column,
    pub(crate) lock_until: Column,
    pub(crate) locked_at: Column,
    pub(crate) locked_by: Column,
    pub(crate) fence: Column,
    pub(crate) last_fire: Column,
}

/// One validated column name: as stored in the catalog, and quoted for SQL.
#[derive(Clone, Debug)]
pub(crate) struct Column {
    /// Lower case, as `pg_attribute.attname` holds it.
    pub(crate) catalog: String,
    /// Double-quoted, for SQL text.
    pub(crate) sql: String,
}

impl Column {
    fn new(validated: &str) -> Self {
        let catalog = validated.to_ascii_lowercase();
        Column {
            sql: quote(&catalog),
            catalog,
        }
    }
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sql)
    }
}

/// Quotes an identifier that `validate_identifier` accepted: it cannot contain `"`, so wrapping
/// it is enough.
fn quote(identifier: &str) -> String {
    format!("\"{identifier}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_quotes_like_unquoted_sql() {
        let config = LockTableConfig {
            table: "Ops.ShedLock".into(),
            columns: ColumnNames {
                locked_by: "User".into(),
                ..ColumnNames::default()
            },
        };
        let table = config.resolve().unwrap();
        assert_eq!(table.display, "ops.shedlock");
        assert_eq!(table.qualified, r#""ops"."shedlock""#);
        assert_eq!(table.locked_by.sql, r#""user""#);
        assert_eq!(table.locked_by.catalog, "user");
    }

    #[test]
    fn refuses_what_is_not_an_identifier() {
        for table in ["", "a.b.c", "x\"y", "sched lock", "1table", "t;--"] {
            let config = LockTableConfig {
                table: table.into(),
                ..LockTableConfig::default()
            };
            assert!(
                matches!(config.resolve(), Err(LockError::InvalidConfiguration(_))),
                "{table:?} accepted"
            );
        }
        let config = LockTableConfig {
            columns: ColumnNames {
                lock_until: "until\"".into(),
                ..ColumnNames::default()
            },
            ..LockTableConfig::default()
        };
        assert!(config.resolve().is_err());
    }
}
