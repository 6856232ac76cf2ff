//! The lock table: its DDL, what an existing table looks like in the catalog, and how
//! `ensure_schema` creates or migrates it.

use lock_core::LockError;
use lock_core::kit::{MAX_INSTANCE_ID_LEN, MAX_LOCK_NAME_LEN, ResolvedTable};
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

/// What the lock table supports, as found by
/// [`PostgresLockProvider::check_schema`](crate::PostgresLockProvider::check_schema).
///
/// ```no_run
/// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
/// use lock_provider_postgres::TableShape;
/// match provider.check_schema().await? {
///     TableShape::Full => {}
///     TableShape::ShedLockOnly => println!("run ensure_schema() to enable fencing"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableShape {
    /// All six columns: exclusion, fencing and once-per-slot.
    Full,
    /// Only ShedLock's four columns (a table made by ShedLock's own DDL): exclusion only;
    /// leases carry fence 0 and slots are ignored until
    /// [`PostgresLockProvider::ensure_schema`](crate::PostgresLockProvider::ensure_schema) adds
    /// `fence` and `last_fire`.
    ShedLockOnly,
}

/// The statement that creates the table with all six columns (no-op if it exists).
pub(crate) fn create_table(t: &ResolvedTable) -> String {
    let c = &t.columns;
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\n  \
           {name} VARCHAR({MAX_LOCK_NAME_LEN}) NOT NULL PRIMARY KEY,\n  \
           {until} TIMESTAMP(3) NOT NULL,\n  \
           {at} TIMESTAMP(3) NOT NULL,\n  \
           {by} VARCHAR({MAX_INSTANCE_ID_LEN}) NOT NULL,\n  \
           {fence} BIGINT NOT NULL DEFAULT 0,\n  \
           {last_fire} TIMESTAMP(3) NULL\n\
         );",
        table = t.qualified,
        name = c.name,
        until = c.lock_until,
        at = c.locked_at,
        by = c.locked_by,
        fence = c.fence,
        last_fire = c.last_fire,
    )
}

/// The statements that add the extension columns to a ShedLock table. Both have defaults, so
/// ShedLock's own INSERTs keep working and adding them rewrites no rows.
pub(crate) fn add_extension_columns(t: &ResolvedTable) -> String {
    format!(
        "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {fence} BIGINT NOT NULL DEFAULT 0;\n\
         ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {last_fire} TIMESTAMP(3) NULL;",
        table = t.qualified,
        fence = t.columns.fence,
        last_fire = t.columns.last_fire,
    )
}

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
/// error for a missing table. Sent unnamed with its parameter type, so that it leaves no
/// prepared statement behind (PgBouncer in transaction mode) and costs one round trip.
pub(crate) async fn find<C: GenericClient + Sync>(
    client: &C,
    table: &ResolvedTable,
) -> Result<Found, tokio_postgres::Error> {
    let rows = client
        .query_typed(
            "SELECT c.oid IS NOT NULL, a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM (SELECT to_regclass($1) AS oid) AS c \
             LEFT JOIN pg_catalog.pg_attribute a \
               ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[(&table.qualified, Type::TEXT)],
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
) -> Result<TableShape, LockError> {
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
    let c = &table.columns;
    for (role, column) in c.required() {
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
    for column in [&c.lock_until, &c.locked_at, &c.last_fire] {
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
    let mut problems = Vec::new();
    // Times are kept to the millisecond: `timestamp(0)` rounds to the second, so two slots
    // within a second collide and a lease may end up to half a second early.
    for column in [&c.lock_until, &c.locked_at, &c.last_fire] {
        if let Some(ty) = type_of(&column.catalog)
            && timestamp_precision(ty) < 3
        {
            problems.push((
                format!(
                    "{:?} is `{ty}`, which does not keep milliseconds",
                    column.catalog
                ),
                format!("ALTER COLUMN {column} TYPE TIMESTAMP(3)"),
            ));
        }
    }
    // The fence is read as an `i64`: a narrower column would fail the read after the grant
    // committed, so every fire would take the lock and run nothing.
    if let Some(ty) = type_of(&c.fence.catalog)
        && ty != "bigint"
    {
        problems.push((
            format!("{:?} is `{ty}`, not `bigint`", c.fence.catalog),
            format!("ALTER COLUMN {} TYPE BIGINT", c.fence),
        ));
    }
    if !problems.is_empty() {
        let (why, fixes): (Vec<String>, Vec<String>) = problems.into_iter().unzip();
        return Err(LockError::InvalidConfiguration(format!(
            "lock table {} cannot be used as it is: {}; run: ALTER TABLE {} {};",
            table.display,
            why.join("; "),
            table.qualified,
            fixes.join(", ")
        )));
    }
    if type_of(&c.fence.catalog).is_some() && type_of(&c.last_fire.catalog).is_some() {
        Ok(TableShape::Full)
    } else {
        Ok(TableShape::ShedLockOnly)
    }
}

/// The digits of a second a `timestamp` column keeps, from its `format_type` spelling:
/// `timestamp(3) without time zone` keeps 3, `timestamp without time zone` PostgreSQL's
/// default of 6.
fn timestamp_precision(ty: &str) -> u32 {
    ty.strip_prefix("timestamp(")
        .and_then(|rest| rest.split(')').next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(6)
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
    // Unnamed, as `find`: a named statement could collide behind PgBouncer with one another
    // client left on the same server connection.
    let key = format!("lock-provider-postgres ensure_schema {}", table.qualified);
    tx.query_typed(
        "SELECT pg_advisory_xact_lock(1397247051, hashtext($1))",
        &[(&key, Type::TEXT)],
    )
    .await?;
    match find(&*tx, table).await? {
        Found::Missing => tx.batch_execute(&create_table(table)).await?,
        Found::Present(columns) => {
            let has = |c: &str| columns.iter().any(|(name, _)| name == c);
            let c = &table.columns;
            if !has(&c.fence.catalog) || !has(&c.last_fire.catalog) {
                tx.batch_execute(&add_extension_columns(table)).await?;
            }
        }
    }
    tx.commit().await
}

#[cfg(test)]
mod tests {
    use super::timestamp_precision;

    #[test]
    fn precision_of_a_timestamp_column() {
        assert_eq!(timestamp_precision("timestamp(0) without time zone"), 0);
        assert_eq!(timestamp_precision("timestamp(3) without time zone"), 3);
        assert_eq!(timestamp_precision("timestamp without time zone"), 6);
    }
}
