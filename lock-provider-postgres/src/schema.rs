//! What the lock table looks like in the database, and how `ensure_schema` creates or
//! migrates it.

use lock_core::LockError;
use tokio_postgres::GenericClient;

use crate::config::ResolvedTable;
use crate::sql::{self, Shape};

/// The table as found in the catalog.
#[derive(Debug)]
pub(crate) enum Found {
    /// No such relation (on the connection's `search_path` when unqualified).
    Missing,
    /// The table exists; its columns are `(name, type)` in the catalog's spelling.
    Present(Vec<(String, String)>),
}

/// Reads the table's columns in one round trip. `to_regclass` resolves the name exactly as the
/// lock statements will (same quoting, same `search_path`), and returns NULL rather than an
/// error for a missing table.
pub(crate) async fn find<C: GenericClient + Sync>(
    client: &C,
    table: &ResolvedTable,
) -> Result<Found, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT c.oid IS NOT NULL, a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM (SELECT to_regclass($1) AS oid) AS c \
             LEFT JOIN pg_catalog.pg_attribute a \
               ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[&table.qualified],
        )
        .await?;
    let present = rows.first().map(|r| r.get::<_, bool>(0)).unwrap_or(false);
    if !present {
        return Ok(Found::Missing);
    }
    let columns = rows
        .iter()
        .filter_map(|r| Some((r.get::<_, Option<String>>(1)?, r.get::<_, String>(2))))
        .collect();
    Ok(Found::Present(columns))
}

/// Decides the shape of an existing table, or says precisely why the provider cannot use it.
pub(crate) fn shape_of(
    table: &ResolvedTable,
    columns: &[(String, String)],
) -> Result<Shape, LockError> {
    let type_of = |column: &str| {
        columns
            .iter()
            .find(|(name, _)| name == column)
            .map(|(_, ty)| ty.as_str())
    };
    let listing = || {
        columns
            .iter()
            .map(|(name, ty)| format!("{name} {ty}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let required = [
        ("name", &table.name),
        ("lock_until", &table.lock_until),
        ("locked_at", &table.locked_at),
        ("locked_by", &table.locked_by),
    ];
    for (role, column) in required {
        if type_of(&column.catalog).is_none() {
            return Err(LockError::InvalidConfiguration(format!(
                "lock table {} has no column {:?} (configured for `{role}`); its columns are: {}",
                table.display,
                column.catalog,
                listing()
            )));
        }
    }
    // Timestamps are UTC wall time in zone-less columns, as ShedLock stores them; a
    // `timestamptz` column would be shifted by the session's TimeZone on every comparison.
    for column in [&table.lock_until, &table.locked_at, &table.last_fire] {
        if let Some(ty) = type_of(&column.catalog)
            && !(ty.starts_with("timestamp") && ty.ends_with("without time zone"))
        {
            return Err(LockError::InvalidConfiguration(format!(
                "lock table {}: column {:?} is `{ty}`; it must be `TIMESTAMP(3)` (without time \
                 zone) holding UTC, as ShedLock's PostgreSQL DDL makes it",
                table.display, column.catalog
            )));
        }
    }
    if type_of(&table.fence.catalog).is_some() && type_of(&table.last_fire.catalog).is_some() {
        Ok(Shape::Full)
    } else {
        Ok(Shape::ShedLockOnly)
    }
}

/// Creates the table, or adds the extension columns to a ShedLock table, in one transaction
/// serialized by an advisory lock so that many instances starting at once do not race on
/// `CREATE TABLE` (which is not atomic against a concurrent create of the same name). A table
/// that already has every column is left alone: no DDL, so no `ACCESS EXCLUSIVE` lock on a live
/// table at every start-up.
pub(crate) async fn ensure(
    client: &mut deadpool_postgres::Client,
    table: &ResolvedTable,
) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    // Two-key form: its key space is separate from the one-bigint form applications use most.
    tx.execute(
        "SELECT pg_advisory_xact_lock(1397247051, hashtext($1))",
        &[&format!(
            "lock-provider-postgres ensure_schema {}",
            table.qualified
        )],
    )
    .await?;
    match find(&*tx, table).await? {
        Found::Missing => tx.batch_execute(&sql::create_table(table)).await?,
        Found::Present(columns) => {
            let has = |c: &str| columns.iter().any(|(name, _)| name == c);
            if !has(&table.fence.catalog) || !has(&table.last_fire.catalog) {
                tx.batch_execute(&sql::add_extension_columns(table)).await?;
            }
        }
    }
    tx.commit().await
}
