//! The lock table: its validated name and columns, its DDL, and how `ensure_schema` creates
//! it or adds the extension columns to a ShedLock table.

use lock_core::LockError;
use lock_core::kit::{
    IdentifierStyle, LockTableConfig, MAX_INSTANCE_ID_LEN, MAX_LOCK_NAME_LEN, ResolvedTable,
    validate_table_name,
};
use rusqlite::{Connection, params};

/// `?1` table, `?2` schema: the table's column names.
const TABLE_COLUMNS: &str = "SELECT name FROM pragma_table_info(?1, ?2)";

/// The lock table, resolved once, with its DDL.
#[derive(Debug)]
pub(crate) struct Table {
    /// Names validated and quoted by the kit.
    pub(crate) resolved: ResolvedTable,
    /// The schema the table lives in: always `main` (the only one the connection has).
    schema: String,
    pub(crate) create_table: String,
    pub(crate) add_fence: String,
    pub(crate) add_last_fire: String,
}

impl Table {
    /// Validates the names (a schema other than `main` included) and builds the DDL.
    pub(crate) fn new(config: &LockTableConfig) -> Result<Self, LockError> {
        let table = &config.table;
        let (schema, _) = validate_table_name(table)?;
        // Another schema would be a database ATTACHed to the provider's private connection,
        // which nothing can do; refuse it here rather than report a missing table later.
        if let Some(schema) = schema.filter(|s| !s.eq_ignore_ascii_case("main")) {
            return Err(LockError::InvalidConfiguration(format!(
                "table name {table:?}: schema {schema:?} is not available to the SQLite lock \
                 provider; use `table` or `main.table`"
            )));
        }
        let resolved = config.resolve(IdentifierStyle::ANSI)?;
        let t = &resolved.qualified;
        let c = &resolved.columns;
        let (name, lock_until, locked_at) = (&c.name, &c.lock_until, &c.locked_at);
        let (locked_by, fence, last_fire) = (&c.locked_by, &c.fence, &c.last_fire);
        let create_table = format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n  \
             {name} VARCHAR({MAX_LOCK_NAME_LEN}) NOT NULL PRIMARY KEY,\n  \
             {lock_until} TEXT NOT NULL,\n  \
             {locked_at} TEXT NOT NULL,\n  \
             {locked_by} VARCHAR({MAX_INSTANCE_ID_LEN}) NOT NULL,\n  \
             {fence} INTEGER NOT NULL DEFAULT 0,\n  \
             {last_fire} TEXT NULL\n\
             ) WITHOUT ROWID;"
        );
        let add_fence = format!("ALTER TABLE {t} ADD COLUMN {fence} INTEGER NOT NULL DEFAULT 0;");
        let add_last_fire = format!("ALTER TABLE {t} ADD COLUMN {last_fire} TEXT NULL;");
        Ok(Table {
            schema: resolved.schema.clone().unwrap_or_else(|| "main".to_owned()),
            resolved,
            create_table,
            add_fence,
            add_last_fire,
        })
    }

    /// The table as the user named it, for messages.
    pub(crate) fn display(&self) -> &str {
        &self.resolved.display
    }

    /// Creates the table if needed and adds the missing extension columns, on a connection
    /// inside a write transaction. `Ok(Err(missing))` names ShedLock columns an existing table
    /// lacks (configured names that match nothing).
    pub(crate) fn ensure(
        &self,
        connection: &Connection,
    ) -> rusqlite::Result<Result<(), Vec<String>>> {
        connection.execute_batch(&self.create_table)?;
        let present = self.columns_present(connection)?;
        let has = |column: &str| present.iter().any(|c| c.eq_ignore_ascii_case(column));
        let columns = &self.resolved.columns;
        let missing: Vec<String> = columns
            .required()
            .into_iter()
            .map(|(_, column)| &column.catalog)
            .filter(|c| !has(c))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Ok(Err(missing));
        }
        if !has(&columns.fence.catalog) {
            connection.execute_batch(&self.add_fence)?;
        }
        if !has(&columns.last_fire.catalog) {
            connection.execute_batch(&self.add_last_fire)?;
        }
        Ok(Ok(()))
    }

    fn columns_present(&self, connection: &Connection) -> rusqlite::Result<Vec<String>> {
        let mut statement = connection.prepare_cached(TABLE_COLUMNS)?;
        let rows =
            statement.query_map(params![self.resolved.name, self.schema], |row| row.get(0))?;
        rows.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_and_quoted() {
        let table = |name: &str| Table::new(&LockTableConfig::default().with_table(name));
        assert!(table("shedlock; DROP TABLE x").is_err());
        assert!(table("aux.locks").is_err());
        let sql = table("main.locks").unwrap();
        assert_eq!(sql.schema, "main");
        assert!(
            sql.create_table
                .starts_with("CREATE TABLE IF NOT EXISTS \"main\".\"locks\"")
        );
    }
}
