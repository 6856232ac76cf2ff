//! The lock table: its validated name and columns, its DDL, and what an existing table holds.

use lock_core::LockError;
use lock_core::kit::{
    ColumnNames, IdentifierStyle, LockTableConfig, MAX_INSTANCE_ID_LEN, MAX_LOCK_NAME_LEN,
    ResolvedTable,
};

/// The lock table's name and column names, validated once by the kit so that every statement
/// built from them is safe: each identifier is `[A-Za-z_][A-Za-z0-9_]*` and is quoted with
/// backticks.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    resolved: ResolvedTable,
    columns: ColumnNames,
}

impl Table {
    pub(crate) fn new(config: &LockTableConfig) -> Result<Self, LockError> {
        Ok(Table {
            resolved: config.resolve(IdentifierStyle::MYSQL)?,
            columns: config.columns.clone(),
        })
    }

    pub(crate) fn schema(&self) -> Option<&str> {
        self.resolved.schema.as_deref()
    }

    pub(crate) fn name(&self) -> &str {
        &self.resolved.name
    }

    /// `schema.table` or `table`, for messages.
    pub(crate) fn display(&self) -> String {
        self.resolved.display.clone()
    }

    /// The table as it appears in SQL.
    pub(crate) fn quoted(&self) -> String {
        self.resolved.qualified.clone()
    }

    /// One column, quoted.
    pub(crate) fn col(&self, role: Column) -> String {
        let c = &self.resolved.columns;
        match role {
            Column::Name => &c.name,
            Column::LockUntil => &c.lock_until,
            Column::LockedAt => &c.locked_at,
            Column::LockedBy => &c.locked_by,
            Column::Fence => &c.fence,
            Column::LastFire => &c.last_fire,
        }
        .sql
        .clone()
    }

    /// The statement that creates the table with all six columns.
    ///
    /// `DATETIME(3)` rather than ShedLock's `TIMESTAMP(3)`: a `DATETIME` stores the UTC wall
    /// time as written, while a `TIMESTAMP` converts through the session time zone, and a UTC
    /// time that falls into that zone's spring-forward gap cannot be stored at all (ShedLock
    /// issue 1876). The table is InnoDB because the statements rely on its row locks.
    pub(crate) fn create_ddl(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (\n  \
               {name} VARCHAR({MAX_LOCK_NAME_LEN}) NOT NULL,\n  \
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
    pub(crate) fn migration_ddl(&self, missing: &[Column]) -> Option<String> {
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

    /// Interprets the rows of [`COLUMNS_QUERY`]. `None` when the table does not exist.
    pub(crate) fn layout_from(
        &self,
        rows: &[(String, String)],
    ) -> Result<Option<Shape>, LockError> {
        if rows.is_empty() {
            return Ok(None);
        }
        let find = |column: &str| {
            rows.iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(column))
                .map(|(_, data_type)| data_type.as_str())
        };
        let c = &self.columns;
        let mut zone_sensitive = false;
        for (role, column) in [
            ("name", &c.name),
            ("lock_until", &c.lock_until),
            ("locked_at", &c.locked_at),
            ("locked_by", &c.locked_by),
        ] {
            match find(column) {
                Some(data_type) => zone_sensitive |= data_type.eq_ignore_ascii_case("timestamp"),
                None => {
                    return Err(LockError::InvalidConfiguration(format!(
                        "lock table {} has no column `{column}` (the `{role}` column); its columns \
                         are: {}",
                        self.display(),
                        rows.iter()
                            .map(|(name, _)| name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
        }
        let fence = find(&c.fence);
        let last_fire = find(&c.last_fire);
        if let Some(data_type) = last_fire {
            zone_sensitive |= data_type.eq_ignore_ascii_case("timestamp");
        }
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
        Ok(Some(Shape {
            extended,
            zone_sensitive,
        }))
    }

    /// The extension columns missing from a table with these [`COLUMNS_QUERY`] rows.
    pub(crate) fn missing_extension_columns(&self, rows: &[(String, String)]) -> Vec<Column> {
        let has = |column: &str| {
            rows.iter()
                .any(|(name, _)| name.eq_ignore_ascii_case(column))
        };
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

/// The columns of a table and their types, from `information_schema`. Parameters: the schema
/// (`NULL` for the connection's database) and the table name.
pub(crate) const COLUMNS_QUERY: &str = "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS \
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?";

/// A column by its role in the lock table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Column {
    Name,
    LockUntil,
    LockedAt,
    LockedBy,
    Fence,
    LastFire,
}

/// What an existing lock table holds, as found in `information_schema`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Has the `fence` and `last_fire` columns. Without them (a table made by ShedLock's own
    /// DDL) leases still exclude each other, but fences are 0 and slots are not remembered.
    pub(crate) extended: bool,
    /// A time column is a `TIMESTAMP`, whose values convert through the session time zone.
    pub(crate) zone_sensitive: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(columns: &[(&str, &str)]) -> Vec<(String, String)> {
        columns
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    fn table(name: &str, columns: ColumnNames) -> Result<Table, LockError> {
        Table::new(
            &LockTableConfig::default()
                .with_table(name)
                .with_columns(columns),
        )
    }

    #[test]
    fn refuses_unsafe_identifiers() {
        assert!(table("shedlock`; DROP TABLE x; --", ColumnNames::default()).is_err());
        let columns = ColumnNames {
            fence: "fence`".into(),
            ..ColumnNames::default()
        };
        assert!(table("shedlock", columns).is_err());
        let table = table("ops.locks", ColumnNames::default()).unwrap();
        assert_eq!(table.quoted(), "`ops`.`locks`");
        assert_eq!(table.display(), "ops.locks");
    }

    #[test]
    fn ddl_uses_datetime_and_custom_columns() {
        let columns = ColumnNames {
            locked_by: "owner".into(),
            ..ColumnNames::default()
        };
        let ddl = table("jobs_lock", columns).unwrap().create_ddl();
        assert!(
            ddl.starts_with("CREATE TABLE IF NOT EXISTS `jobs_lock`"),
            "{ddl}"
        );
        assert!(ddl.contains("`owner` VARCHAR(255) NOT NULL"), "{ddl}");
        assert!(ddl.contains("`lock_until` DATETIME(3) NOT NULL"), "{ddl}");
        assert!(!ddl.contains("TIMESTAMP"), "{ddl}");
    }

    #[test]
    fn shapes() {
        let table = table("shedlock", ColumnNames::default()).unwrap();
        assert_eq!(table.layout_from(&[]).unwrap(), None);
        let shedlock = rows(&[
            ("name", "varchar"),
            ("lock_until", "timestamp"),
            ("locked_at", "timestamp"),
            ("locked_by", "varchar"),
        ]);
        assert_eq!(
            table.layout_from(&shedlock).unwrap(),
            Some(Shape {
                extended: false,
                zone_sensitive: true
            })
        );
        let ours = rows(&[
            ("NAME", "varchar"),
            ("lock_until", "datetime"),
            ("locked_at", "datetime"),
            ("locked_by", "varchar"),
            ("fence", "bigint"),
            ("last_fire", "datetime"),
        ]);
        assert_eq!(
            table.layout_from(&ours).unwrap(),
            Some(Shape {
                extended: true,
                zone_sensitive: false
            })
        );
        let half = rows(&[
            ("name", "varchar"),
            ("lock_until", "datetime"),
            ("locked_at", "datetime"),
            ("locked_by", "varchar"),
            ("fence", "bigint"),
        ]);
        assert!(table.layout_from(&half).is_err());
        let broken = rows(&[("name", "varchar"), ("lock_until", "datetime")]);
        let err = table.layout_from(&broken).unwrap_err().to_string();
        assert!(err.contains("`locked_at`"), "{err}");
    }

    #[test]
    fn migration_adds_only_what_is_missing() {
        let table = table("shedlock", ColumnNames::default()).unwrap();
        assert_eq!(
            table
                .migration_ddl(&[Column::Fence, Column::LastFire])
                .unwrap(),
            "ALTER TABLE `shedlock` ADD COLUMN `fence` BIGINT NOT NULL DEFAULT 0, \
             ADD COLUMN `last_fire` DATETIME(3) NULL"
        );
        assert_eq!(table.migration_ddl(&[]), None);
        let half = rows(&[("name", "varchar"), ("FENCE", "bigint")]);
        assert_eq!(table.missing_extension_columns(&half), [Column::LastFire]);
    }
}
