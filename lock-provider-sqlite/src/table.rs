//! The lock table: its name, DDL and column checks are the provider kit's
//! ([`lock_sql::sql::sqlite`]); how `ensure_schema` runs them on a rusqlite connection is
//! here.

use lock_sql::sql::sqlite::TABLE_COLUMNS;
use rusqlite::{Connection, params};

pub(crate) use lock_sql::sql::sqlite::Table;

/// Creates the table if needed and adds the missing extension columns, on a connection
/// inside a write transaction. `Ok(Err(missing))` names ShedLock columns an existing table
/// lacks (configured names that match nothing).
pub(crate) fn ensure(
    table: &Table,
    connection: &Connection,
) -> rusqlite::Result<Result<(), Vec<String>>> {
    connection.execute_batch(&table.create_table)?;
    let present = columns_present(table, connection)?;
    match table.migration(&present) {
        Err(missing) => Ok(Err(missing)),
        Ok(ddl) => {
            for statement in ddl {
                connection.execute_batch(statement)?;
            }
            Ok(Ok(()))
        }
    }
}

fn columns_present(table: &Table, connection: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement = connection.prepare_cached(TABLE_COLUMNS)?;
    let rows = statement.query_map(params![table.resolved.name, table.schema], |row| row.get(0))?;
    rows.collect()
}
