//! SQL identifiers: which names are accepted, and how they are written into SQL.
//!
//! Only plain identifiers (ASCII letters, digits and `_`, not starting with a digit) are ever
//! accepted, so quoting one is just wrapping it: no character inside can close the quotes.

/// The longest identifier accepted, in bytes: PostgreSQL's limit (`NAMEDATALEN - 1`), the
/// smallest of the supported databases (MySQL allows 64, SQLite any length).
pub const MAX_IDENTIFIER_LEN: usize = 63;

/// Checks one SQL identifier: ASCII letters, digits and `_`, not starting with a digit, 1 to
/// [`MAX_IDENTIFIER_LEN`] bytes. Such a name needs no quoting in any supported database, so it
/// can never carry SQL.
///
/// ```
/// assert!(lock_sql::validate_identifier("shedlock").is_ok());
/// assert!(lock_sql::validate_identifier("1abc").is_err());
/// assert!(lock_sql::validate_identifier("lock\"; --").is_err());
/// ```
pub fn validate_identifier(identifier: &str) -> Result<(), &'static str> {
    let bytes = identifier.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_IDENTIFIER_LEN {
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

/// How a database writes identifiers: the quote character, and whether it folds the unquoted
/// names of hand-written DDL to lower case (so that the provider must fold the configured names
/// the same way before quoting them, to name the same column as ShedLock's DDL).
///
/// ```
/// use lock_sql::IdentifierStyle;
///
/// assert_eq!(IdentifierStyle::POSTGRES.quote("ShedLock"), r#""shedlock""#);
/// assert_eq!(IdentifierStyle::MYSQL.quote("ShedLock"), "`ShedLock`");
/// assert_eq!(IdentifierStyle::ANSI.quote("order"), r#""order""#);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentifierStyle {
    /// The character on both sides of a quoted identifier.
    pub quote: char,
    /// Whether names are folded to lower case first, as the database folds unquoted names.
    pub fold_to_lowercase: bool,
}

impl IdentifierStyle {
    /// Standard SQL double quotes, names kept as written (SQLite).
    pub const ANSI: Self = IdentifierStyle {
        quote: '"',
        fold_to_lowercase: false,
    };
    /// PostgreSQL: double quotes, names folded to lower case as PostgreSQL folds unquoted ones.
    pub const POSTGRES: Self = IdentifierStyle {
        quote: '"',
        fold_to_lowercase: true,
    };
    /// MySQL and MariaDB: backticks; the server decides case sensitivity, names kept as written.
    pub const MYSQL: Self = IdentifierStyle {
        quote: '`',
        fold_to_lowercase: false,
    };

    /// The name as the database's catalog holds it (folded where the style says so).
    ///
    /// ```
    /// use lock_sql::IdentifierStyle;
    /// assert_eq!(IdentifierStyle::POSTGRES.fold("Lock_Until"), "lock_until");
    /// assert_eq!(IdentifierStyle::MYSQL.fold("Lock_Until"), "Lock_Until");
    /// ```
    pub fn fold(self, identifier: &str) -> String {
        if self.fold_to_lowercase {
            identifier.to_ascii_lowercase()
        } else {
            identifier.to_owned()
        }
    }

    /// The identifier folded and quoted for SQL text. Only for names that
    /// [`validate_identifier`] accepted: they hold no quote character, so wrapping is enough.
    pub fn quote(self, identifier: &str) -> String {
        let q = self.quote;
        format!("{q}{}{q}", self.fold(identifier))
    }
}
