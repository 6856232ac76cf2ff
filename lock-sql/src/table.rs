//! The lock table's name and columns: what a provider is configured with, checked before any
//! SQL is built from it.

use crate::ident::{IdentifierStyle, validate_identifier};
use lock_core::LockError;

/// The default table name, as in ShedLock.
pub const DEFAULT_TABLE: &str = "shedlock";

/// The names of the lock table's columns.
///
/// The first four are ShedLock's; `fence` and `last_fire` are this library's extension
/// columns (with defaults, so ShedLock's own INSERTs still work on the table). Every name is
/// checked by [`ColumnNames::validate`] before it is put into SQL.
///
/// ```
/// use lock_sql::ColumnNames;
/// let columns = ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() };
/// assert!(columns.validate().is_ok());
/// let bad = ColumnNames { name: "name; DROP TABLE x".into(), ..ColumnNames::default() };
/// assert!(bad.validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnNames {
    /// Primary key, `VARCHAR(64)`.
    pub name: String,
    /// End of the current lease.
    pub lock_until: String,
    /// Start of the current lease.
    pub locked_at: String,
    /// Owner (instance id), `VARCHAR(255)`.
    pub locked_by: String,
    /// Fencing token, `BIGINT NOT NULL DEFAULT 0`.
    pub fence: String,
    /// Last scheduled slot run, nullable.
    pub last_fire: String,
}

impl Default for ColumnNames {
    fn default() -> Self {
        ColumnNames {
            name: "name".into(),
            lock_until: "lock_until".into(),
            locked_at: "locked_at".into(),
            locked_by: "locked_by".into(),
            fence: "fence".into(),
            last_fire: "last_fire".into(),
        }
    }
}

impl ColumnNames {
    /// Checks every column name with [`validate_identifier`] and that they are distinct.
    pub fn validate(&self) -> Result<(), LockError> {
        let all = [
            ("name", &self.name),
            ("lock_until", &self.lock_until),
            ("locked_at", &self.locked_at),
            ("locked_by", &self.locked_by),
            ("fence", &self.fence),
            ("last_fire", &self.last_fire),
        ];
        for (role, column) in all {
            validate_identifier(column).map_err(|reason| {
                LockError::InvalidConfiguration(format!("column for `{role}` {column:?}: {reason}"))
            })?;
        }
        for (i, (role, column)) in all.iter().enumerate() {
            if let Some((other, _)) = all[i + 1..]
                .iter()
                .find(|(_, c)| c.eq_ignore_ascii_case(column))
            {
                return Err(LockError::InvalidConfiguration(format!(
                    "columns `{role}` and `{other}` are both named {column:?}"
                )));
            }
        }
        Ok(())
    }
}

/// Checks a table name, optionally qualified by one schema (`schema.table`), and returns its
/// parts.
///
/// ```
/// assert_eq!(lock_sql::validate_table_name("ops.shedlock").unwrap(), (Some("ops"), "shedlock"));
/// assert_eq!(lock_sql::validate_table_name("shedlock").unwrap(), (None, "shedlock"));
/// assert!(lock_sql::validate_table_name("a.b.c").is_err());
/// assert!(lock_sql::validate_table_name("shedlock; DROP TABLE users").is_err());
/// ```
pub fn validate_table_name(table: &str) -> Result<(Option<&str>, &str), LockError> {
    let invalid = |reason: &str| {
        LockError::InvalidConfiguration(format!(
            "table name {table:?}: {reason} (expected `table` or `schema.table`)"
        ))
    };
    let (schema, name) = match table.split_once('.') {
        Some((schema, name)) => (Some(schema), name),
        None => (None, table),
    };
    if let Some(schema) = schema {
        validate_identifier(schema).map_err(invalid)?;
    }
    validate_identifier(name).map_err(invalid)?;
    Ok((schema, name))
}

/// Which table and columns a provider uses: the same type for every SQL provider (each
/// provider crate re-exports it as its config type).
///
/// The table may be schema-qualified (`ops.shedlock`; for MySQL the schema is the database).
/// Every name must be a plain identifier (ASCII letters, digits and `_`);
/// [`validate`](Self::validate) refuses anything else, so no SQL is ever built from an
/// unchecked string.
///
/// ```
/// use lock_sql::{ColumnNames, LockTableConfig};
///
/// let config = LockTableConfig::default()
///     .with_table("ops.shedlock")
///     .with_columns(ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() });
/// assert!(config.validate().is_ok());
/// let bad = LockTableConfig::default().with_table("shedlock; DROP TABLE users");
/// assert!(bad.validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockTableConfig {
    /// `table` or `schema.table`; [`DEFAULT_TABLE`] (`shedlock`) by default.
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
    /// The same configuration on another table (`table` or `schema.table`); checked by
    /// [`validate`](Self::validate) and when a provider is built from it.
    ///
    /// ```
    /// let config = lock_sql::LockTableConfig::default().with_table("job_locks");
    /// assert_eq!(config.table, "job_locks");
    /// ```
    pub fn with_table(self, table: impl Into<String>) -> Self {
        LockTableConfig {
            table: table.into(),
            ..self
        }
    }

    /// The same configuration with other column names.
    ///
    /// ```
    /// use lock_sql::{ColumnNames, LockTableConfig};
    /// let columns = ColumnNames { name: "job".into(), ..ColumnNames::default() };
    /// assert_eq!(LockTableConfig::default().with_columns(columns).columns.name, "job");
    /// ```
    pub fn with_columns(self, columns: ColumnNames) -> Self {
        LockTableConfig { columns, ..self }
    }

    /// Checks the table and column names; the error says which name is wrong and why.
    ///
    /// ```
    /// use lock_sql::{ColumnNames, LockTableConfig};
    ///
    /// let config = LockTableConfig::default()
    ///     .with_columns(ColumnNames { fence: "name".into(), ..ColumnNames::default() });
    /// assert!(config.validate().unwrap_err().to_string().contains("both named"));
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        validate_table_name(&self.table)?;
        self.columns.validate()
    }

    /// Validates the names and turns them into the folded and quoted forms a provider's
    /// statements use, in the database's [`IdentifierStyle`].
    ///
    /// ```
    /// use lock_sql::{IdentifierStyle, LockTableConfig};
    ///
    /// let table = LockTableConfig::default()
    ///     .with_table("Ops.ShedLock")
    ///     .resolve(IdentifierStyle::POSTGRES)?;
    /// assert_eq!(table.display, "ops.shedlock");
    /// assert_eq!(table.qualified, r#""ops"."shedlock""#);
    /// assert_eq!(table.columns.lock_until.to_string(), r#""lock_until""#);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn resolve(&self, style: IdentifierStyle) -> Result<ResolvedTable, LockError> {
        let (schema, table) = validate_table_name(&self.table)?;
        self.columns.validate()?;
        let schema = schema.map(|s| style.fold(s));
        let name = style.fold(table);
        let (display, qualified) = match &schema {
            Some(schema) => (
                format!("{schema}.{name}"),
                format!("{}.{}", style.quote(schema), style.quote(&name)),
            ),
            None => (name.clone(), style.quote(&name)),
        };
        let c = &self.columns;
        let column = |configured: &str| Column {
            catalog: style.fold(configured),
            sql: style.quote(configured),
        };
        Ok(ResolvedTable {
            schema,
            name,
            display,
            qualified,
            columns: ResolvedColumns {
                name: column(&c.name),
                lock_until: column(&c.lock_until),
                locked_at: column(&c.locked_at),
                locked_by: column(&c.locked_by),
                fence: column(&c.fence),
                last_fire: column(&c.last_fire),
            },
        })
    }
}

/// A validated lock table: every name checked, folded and quoted. Built by
/// [`LockTableConfig::resolve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedTable {
    /// The schema (PostgreSQL schema, MySQL database, SQLite `main`) as the catalog holds it,
    /// if the table was qualified.
    pub schema: Option<String>,
    /// The bare table name as the catalog holds it.
    pub name: String,
    /// `schema.table` or `table`, for messages and [`LockProvider::describe`](lock_core::LockProvider::describe).
    pub display: String,
    /// The quoted, possibly schema-qualified name, for SQL text.
    pub qualified: String,
    /// The six columns.
    pub columns: ResolvedColumns,
}

/// The lock table's columns, validated and quoted (see [`ColumnNames`] for their meaning).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are ColumnNames' fields, documented there
pub struct ResolvedColumns {
    pub name: Column,
    pub lock_until: Column,
    pub locked_at: Column,
    pub locked_by: Column,
    pub fence: Column,
    pub last_fire: Column,
}

impl ResolvedColumns {
    /// ShedLock's four columns with their roles, which every usable table must have.
    pub fn required(&self) -> [(&'static str, &Column); 4] {
        [
            ("name", &self.name),
            ("lock_until", &self.lock_until),
            ("locked_at", &self.locked_at),
            ("locked_by", &self.locked_by),
        ]
    }
}

/// One validated column name. Its `Display` is the quoted form, so it can go straight into a
/// `format!` of SQL text.
///
/// ```
/// use lock_sql::{IdentifierStyle, LockTableConfig};
/// let table = LockTableConfig::default().resolve(IdentifierStyle::MYSQL)?;
/// assert_eq!(format!("SELECT {} FROM {}", table.columns.name, table.qualified), "SELECT `name` FROM `shedlock`");
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// As the catalog holds it (e.g. `pg_attribute.attname`, `information_schema.COLUMNS`).
    pub catalog: String,
    /// Quoted, for SQL text.
    pub sql: String,
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sql)
    }
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
        let table = config.resolve(IdentifierStyle::POSTGRES).unwrap();
        assert_eq!(table.display, "ops.shedlock");
        assert_eq!(table.qualified, r#""ops"."shedlock""#);
        assert_eq!(table.columns.locked_by.sql, r#""user""#);
        assert_eq!(table.columns.locked_by.catalog, "user");
    }

    #[test]
    fn refuses_what_is_not_an_identifier() {
        for table in ["", "a.b.c", "x\"y", "sched lock", "1table", "t;--", "x`y"] {
            let config = LockTableConfig::default().with_table(table);
            for style in [IdentifierStyle::POSTGRES, IdentifierStyle::MYSQL] {
                assert!(
                    matches!(
                        config.resolve(style),
                        Err(LockError::InvalidConfiguration(_))
                    ),
                    "{table:?} accepted"
                );
            }
        }
        let config = LockTableConfig::default().with_columns(ColumnNames {
            lock_until: "until\"".into(),
            ..ColumnNames::default()
        });
        assert!(config.resolve(IdentifierStyle::POSTGRES).is_err());
        let config = LockTableConfig::default().with_columns(ColumnNames {
            fence: "fence`".into(),
            ..ColumnNames::default()
        });
        assert!(config.resolve(IdentifierStyle::MYSQL).is_err());
    }

    #[test]
    fn backticks_keep_case() {
        let table = LockTableConfig::default()
            .with_table("ops.locks")
            .resolve(IdentifierStyle::MYSQL)
            .unwrap();
        assert_eq!(table.qualified, "`ops`.`locks`");
        assert_eq!(table.display, "ops.locks");
        assert_eq!(table.schema.as_deref(), Some("ops"));
    }
}
