//! The lock table's name and columns, shared by the SQL providers.

use crate::LockError;

/// The default table name, as in ShedLock.
pub const DEFAULT_TABLE: &str = "shedlock";

/// The names of the lock table's columns.
///
/// The first four are ShedLock's; `fence` and `last_fire` are this library's extension
/// columns (with defaults, so ShedLock's own INSERTs still work on the table). Every name is
/// checked by [`ColumnNames::validate`] before it is put into SQL.
///
/// ```
/// use lock_core::ColumnNames;
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

/// Checks one SQL identifier: ASCII letters, digits and `_`, not starting with a digit, 1 to 63
/// bytes. Such a name needs no quoting in any supported database, so it can never carry SQL.
///
/// ```
/// assert!(lock_core::validate_identifier("shedlock").is_ok());
/// assert!(lock_core::validate_identifier("1abc").is_err());
/// assert!(lock_core::validate_identifier("lock\"; --").is_err());
/// ```
pub fn validate_identifier(identifier: &str) -> Result<(), &'static str> {
    let bytes = identifier.as_bytes();
    if bytes.is_empty() || bytes.len() > 63 {
        return Err("an identifier must be 1 to 63 bytes");
    }
    if bytes[0].is_ascii_digit() {
        return Err("an identifier must not start with a digit");
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
    {
        return Err("an identifier may contain only ASCII letters, digits and `_`");
    }
    Ok(())
}

/// Checks a table name, optionally qualified by one schema (`schema.table`), and returns its
/// parts.
///
/// ```
/// assert_eq!(lock_core::validate_table_name("ops.shedlock").unwrap(), (Some("ops"), "shedlock"));
/// assert_eq!(lock_core::validate_table_name("shedlock").unwrap(), (None, "shedlock"));
/// assert!(lock_core::validate_table_name("a.b.c").is_err());
/// assert!(lock_core::validate_table_name("shedlock; DROP TABLE users").is_err());
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
