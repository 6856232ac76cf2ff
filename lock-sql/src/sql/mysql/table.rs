//! The MySQL/MariaDB lock table: its validated names, DDL, and the checks of an existing
//! table's shape (`information_schema`), with the `ALTER TABLE` to run where it would misbehave.

use super::*;

/// The lock table's name and column names, validated once by the kit so that every statement
/// built from them is safe: each identifier is `[A-Za-z_][A-Za-z0-9_]*` and is quoted with
/// backticks.
///
/// ```
/// use lock_sql::LockTableConfig;
/// use lock_sql::sql::mysql::Table;
///
/// let table = Table::new(&LockTableConfig::default().with_table("ops.locks"))?;
/// assert!(table.create_ddl().starts_with("CREATE TABLE IF NOT EXISTS `ops`.`locks`"));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Table {
    resolved: ResolvedTable,
    columns: ColumnNames,
}

impl Table {
    /// Validates and quotes the configured names.
    pub fn new(config: &LockTableConfig) -> Result<Self, LockError> {
        Ok(Table {
            resolved: config.resolve(IdentifierStyle::MYSQL)?,
            columns: config.columns.clone(),
        })
    }

    /// The database the table was qualified with, if any.
    pub fn schema(&self) -> Option<&str> {
        self.resolved.schema.as_deref()
    }

    /// The bare table name.
    pub fn name(&self) -> &str {
        &self.resolved.name
    }

    /// `schema.table` or `table`, for messages.
    pub fn display(&self) -> String {
        self.resolved.display.clone()
    }

    /// The table as it appears in SQL.
    pub fn quoted(&self) -> String {
        self.resolved.qualified.clone()
    }

    /// One column, quoted.
    pub fn col(&self, role: Column) -> String {
        self.resolved(role).sql.clone()
    }

    /// One column, as `information_schema` names it.
    fn column_name(&self, role: Column) -> &str {
        &self.resolved(role).catalog
    }

    fn resolved(&self, role: Column) -> &crate::Column {
        let c = &self.resolved.columns;
        match role {
            Column::Name => &c.name,
            Column::LockUntil => &c.lock_until,
            Column::LockedAt => &c.locked_at,
            Column::LockedBy => &c.locked_by,
            Column::Fence => &c.fence,
            Column::LastFire => &c.last_fire,
        }
    }

    /// `name` is `VARBINARY`: compared byte by byte, so `Report`, `report` and `report ` are
    /// three locks, where a `VARCHAR` in the server's default collation would make them one
    /// (case- and accent-insensitive, trailing spaces ignored).
    ///
    /// `DATETIME(3)` rather than ShedLock's `TIMESTAMP(3)`: a `DATETIME` stores the UTC wall
    /// time as written, while a `TIMESTAMP` converts through the session time zone, and a UTC
    /// time that falls into that zone's spring-forward gap cannot be stored at all (ShedLock
    /// issue 1876). The table is InnoDB because the statements rely on its row locks.
    pub fn create_ddl(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (\n  \
               {name} {NAME_TYPE} NOT NULL,\n  \
               {lock_until} DATETIME(3) NOT NULL,\n  \
               {locked_at} DATETIME(3) NOT NULL,\n  \
               {locked_by} VARCHAR({MAX_INSTANCE_ID_LEN}) NOT NULL,\n  \
               {fence} BIGINT NOT NULL DEFAULT 0,\n  \
               {last_fire} DATETIME(3) NULL,\n  \
               PRIMARY KEY ({name})\n\
             ) ENGINE=InnoDB",
            table = self.quoted(),
            name = self.col(Column::Name),
            lock_until = self.col(Column::LockUntil),
            locked_at = self.col(Column::LockedAt),
            locked_by = self.col(Column::LockedBy),
            fence = self.col(Column::Fence),
            last_fire = self.col(Column::LastFire),
        )
    }

    /// The statement that adds the extension columns missing from an existing table.
    pub fn migration_ddl(&self, missing: &[Column]) -> Option<String> {
        let additions: Vec<String> = missing
            .iter()
            .filter_map(|column| match column {
                Column::Fence => Some(format!(
                    "ADD COLUMN {} BIGINT NOT NULL DEFAULT 0",
                    self.col(Column::Fence)
                )),
                Column::LastFire => Some(format!(
                    "ADD COLUMN {} DATETIME(3) NULL",
                    self.col(Column::LastFire)
                )),
                _ => None,
            })
            .collect();
        (!additions.is_empty())
            .then(|| format!("ALTER TABLE {} {}", self.quoted(), additions.join(", ")))
    }

    /// Interprets the rows of [`COLUMNS_QUERY`]. `None` when the table does not exist; an
    /// error naming every problem, and the `ALTER TABLE` that fixes them, when the table would
    /// misbehave.
    pub fn layout_from(&self, rows: &[ColumnInfo]) -> Result<Option<Shape>, LockError> {
        if rows.is_empty() {
            return Ok(None);
        }
        let find = |column: &str| rows.iter().find(|c| c.name.eq_ignore_ascii_case(column));
        let c = &self.columns;
        for (role, column) in [
            ("name", &c.name),
            ("lock_until", &c.lock_until),
            ("locked_at", &c.locked_at),
            ("locked_by", &c.locked_by),
        ] {
            if find(column).is_none() {
                return Err(LockError::InvalidConfiguration(format!(
                    "lock table {} has no column `{column}` (the `{role}` column); its columns \
                     are: {}",
                    self.display(),
                    rows.iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let fence = find(&c.fence);
        let last_fire = find(&c.last_fire);
        let extended = match (fence, last_fire) {
            (Some(_), Some(_)) => true,
            (None, None) => false,
            _ => {
                return Err(LockError::InvalidConfiguration(format!(
                    "lock table {} has only one of the columns `{}` and `{}`; run \
                     `ensure_schema()` to add the other",
                    self.display(),
                    c.fence,
                    c.last_fire
                )));
            }
        };
        let problems = self.problems(rows, extended);
        if !problems.is_empty() {
            let (why, fixes): (Vec<String>, Vec<String>) = problems.into_iter().unzip();
            return Err(LockError::InvalidConfiguration(format!(
                "lock table {} cannot be used as it is: {}; run: ALTER TABLE {} {}",
                self.display(),
                why.join("; "),
                self.quoted(),
                fixes.join(", ")
            )));
        }
        let zone_sensitive = rows
            .iter()
            .filter(|column| {
                [&c.lock_until, &c.locked_at, &c.last_fire]
                    .iter()
                    .any(|name| column.name.eq_ignore_ascii_case(name))
            })
            .any(|column| column.data_type.eq_ignore_ascii_case("timestamp"));
        Ok(Some(Shape {
            extended,
            zone_sensitive,
        }))
    }

    /// What would make the provider misbehave on a table with these columns, each with the
    /// clause of an `ALTER TABLE` that fixes it.
    fn problems(&self, rows: &[ColumnInfo], extended: bool) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let find = |column: &str| rows.iter().find(|c| c.name.eq_ignore_ascii_case(column));
        let c = &self.columns;
        if let Some(name) = find(&c.name)
            && !name.is_one_of(&["char", "varchar", "binary", "varbinary"])
        {
            problems.push((
                format!("`{}` is {}, not a string", c.name, name.data_type),
                format!("MODIFY {} {NAME_TYPE} NOT NULL", self.col(Column::Name)),
            ));
        }
        if let Some(by) = find(&c.locked_by)
            && !by.is_one_of(&[
                "char",
                "varchar",
                "tinytext",
                "text",
                "mediumtext",
                "longtext",
            ])
        {
            problems.push((
                format!("`{}` is {}, not a string", c.locked_by, by.data_type),
                format!(
                    "MODIFY {} VARCHAR({MAX_INSTANCE_ID_LEN}) NOT NULL",
                    self.col(Column::LockedBy)
                ),
            ));
        }
        // Times are stored to the millisecond: with fewer digits the server rounds, so two
        // slots within a second collide and a lease may end up to half a second early.
        for (role, null) in [
            (Column::LockUntil, "NOT NULL"),
            (Column::LockedAt, "NOT NULL"),
            (Column::LastFire, "NULL"),
        ] {
            let Some(column) = find(self.column_name(role)) else {
                continue;
            };
            let time = column.is_one_of(&["datetime", "timestamp"]);
            if time && column.precision.unwrap_or(0) >= 3 {
                continue;
            }
            let fixed = if column.data_type.eq_ignore_ascii_case("timestamp") {
                "TIMESTAMP(3)"
            } else {
                "DATETIME(3)"
            };
            problems.push((
                format!(
                    "`{}` is {}{}, which does not keep milliseconds",
                    column.name,
                    column.data_type,
                    column
                        .precision
                        .map(|p| format!("({p})"))
                        .unwrap_or_default()
                ),
                format!("MODIFY {} {fixed} {null}", self.col(role)),
            ));
        }
        if let Some(fence) = find(&c.fence)
            && !fence.is_one_of(&["bigint"])
        {
            problems.push((
                format!(
                    "`{}` is {}, too narrow for a fence that only grows",
                    c.fence, fence.data_type
                ),
                format!(
                    "MODIFY {} BIGINT NOT NULL DEFAULT 0",
                    self.col(Column::Fence)
                ),
            ));
        }
        // The server reports a new row's AUTO_INCREMENT value where the acquire reads its
        // fence, so the first lease of every name would carry the surrogate key.
        if extended
            && let Some(key) = rows
                .iter()
                .find(|c| c.extra.to_ascii_lowercase().contains("auto_increment"))
        {
            let name_is_key = find(&c.name).is_some_and(|n| n.key.eq_ignore_ascii_case("PRI"));
            problems.push((
                format!(
                    "`{}` is AUTO_INCREMENT, whose value the server reports in place of the fence",
                    key.name
                ),
                if name_is_key {
                    format!("DROP COLUMN `{}`", key.name)
                } else {
                    format!(
                        "DROP COLUMN `{}`, ADD PRIMARY KEY ({})",
                        key.name,
                        self.col(Column::Name)
                    )
                },
            ));
        }
        problems
    }

    /// Why the `name` column of a table with these columns makes names that differ (in case,
    /// accents or trailing spaces) share one lock, with the statement that fixes it; `None`
    /// when names are compared byte by byte.
    pub fn name_collation_warning(&self, rows: &[ColumnInfo]) -> Option<String> {
        let name = rows
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(&self.columns.name))?;
        let collation = self.name_collation(rows)?;
        Some(format!(
            "lock table {}: column `{}` has collation {collation}, so lock names that differ \
             only in case, accents or trailing spaces (`Report`, `report`) share one lock; to \
             make them distinct locks, run: ALTER TABLE {} MODIFY {} {NAME_TYPE} NOT NULL",
            self.display(),
            name.name,
            self.quoted(),
            self.col(Column::Name)
        ))
    }

    /// The collation of the `name` column when it does not compare bytes (see
    /// [`name_collation_warning`](Self::name_collation_warning)); `None` when it does.
    pub fn name_collation<'a>(&self, rows: &'a [ColumnInfo]) -> Option<&'a str> {
        let name = rows
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(&self.columns.name))?;
        let collation = name.collation.as_deref()?;
        let lower = collation.to_ascii_lowercase();
        // Binary and no-pad binary collations compare bytes; `binary` types have none.
        if lower == "binary" || lower.ends_with("_nopad_bin") || lower.ends_with("_0900_bin") {
            return None;
        }
        Some(collation)
    }

    /// The extension columns missing from a table with these [`COLUMNS_QUERY`] rows.
    pub fn missing_extension_columns(&self, rows: &[ColumnInfo]) -> Vec<Column> {
        let has = |column: &str| rows.iter().any(|c| c.name.eq_ignore_ascii_case(column));
        let mut missing = Vec::new();
        if !has(&self.columns.fence) {
            missing.push(Column::Fence);
        }
        if !has(&self.columns.last_fire) {
            missing.push(Column::LastFire);
        }
        missing
    }
}

/// The query that finds lock names a `name` column of `collation` keeps in one row: parameter
/// 1 is the names as a JSON array ([`json_names`]); each row is two distinct names (as bytes)
/// that compare equal, grouped by the server itself so that its rules (case, accents, trailing
/// spaces) are exactly the table's. `None` for a collation name that is not a plain identifier.
///
/// ```
/// let query = lock_sql::sql::mysql::names_sharing_a_row_query("utf8mb4_general_ci").unwrap();
/// assert!(query.contains("COLLATE utf8mb4_general_ci"));
/// assert_eq!(lock_sql::sql::mysql::names_sharing_a_row_query("x; DROP"), None);
/// ```
pub fn names_sharing_a_row_query(collation: &str) -> Option<String> {
    let plain =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    // A collation's name starts with its character set's (`utf8mb4_general_ci`, `latin1_bin`).
    let (charset, _) = collation.split_once('_')?;
    if !plain(collation) || !plain(charset) {
        return None;
    }
    Some(format!(
        "SELECT MIN(CAST(n AS BINARY)), MAX(CAST(n AS BINARY)) \
         FROM JSON_TABLE(?, '$[*]' COLUMNS(n VARCHAR(255) PATH '$')) AS names \
         GROUP BY CONVERT(n USING {charset}) COLLATE {collation} \
         HAVING COUNT(DISTINCT CAST(n AS BINARY)) > 1"
    ))
}

/// `names` as a JSON array of strings, the parameter of [`names_sharing_a_row_query`].
///
/// ```
/// assert_eq!(lock_sql::sql::mysql::json_names(&["a\"b", "c\\"]), r#"["a\"b","c\\"]"#);
/// ```
pub fn json_names(names: &[&str]) -> String {
    let mut json = String::from("[");
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push('"');
        for c in name.chars() {
            match c {
                '"' => json.push_str("\\\""),
                '\\' => json.push_str("\\\\"),
                c if c.is_control() => json.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => json.push(c),
            }
        }
        json.push('"');
    }
    json.push(']');
    json
}

/// The type of the `name` column: bytes compared as bytes, as many as the longest lock name
/// (`MAX_LOCK_NAME_LEN`, checked by a unit test).
const NAME_TYPE: &str = "VARBINARY(64)";

/// One row of [`COLUMNS_QUERY`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnInfo {
    /// `COLUMN_NAME`.
    pub name: String,
    /// `DATA_TYPE`: `varchar`, `datetime`, `bigint`...
    pub data_type: String,
    /// `DATETIME_PRECISION`: digits of the fraction of a second, for time columns.
    pub precision: Option<u64>,
    /// `COLLATION_NAME`: for character columns.
    pub collation: Option<String>,
    /// `COLUMN_KEY`: `PRI` for the primary key.
    pub key: String,
    /// `EXTRA`: holds `auto_increment` for such a column.
    pub extra: String,
}

impl ColumnInfo {
    fn is_one_of(&self, types: &[&str]) -> bool {
        types.iter().any(|t| self.data_type.eq_ignore_ascii_case(t))
    }
}

/// The columns of a table and their types, from `information_schema`. Parameters: the schema
/// (`NULL` for the connection's database) and the table name.
pub const COLUMNS_QUERY: &str = "SELECT COLUMN_NAME, DATA_TYPE, DATETIME_PRECISION, \
     COLLATION_NAME, COLUMN_KEY, EXTRA FROM information_schema.COLUMNS \
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?";

/// A column by its role in the lock table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // the roles are ColumnNames' fields, documented there
pub enum Column {
    Name,
    LockUntil,
    LockedAt,
    LockedBy,
    Fence,
    LastFire,
}

/// What an existing lock table holds, as found in `information_schema`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Has the `fence` and `last_fire` columns. Without them (a table made by ShedLock's own
    /// DDL) leases still exclude each other, but fences are 0 and slots are not remembered.
    pub extended: bool,
    /// A time column is a `TIMESTAMP`, whose values convert through the session time zone.
    pub zone_sensitive: bool,
}

#[cfg(test)]
mod tests;
