//! The lock table: what an existing table looks like in the catalog, and how `ensure_schema`
//! creates or migrates it. The DDL, the catalog query and the shape checks are the provider
//! kit's ([`lock_sql::sql::postgres`]); running them is tokio-postgres's.

use lock_sql::ResolvedTable;
use lock_sql::sql::postgres as sql;
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
pub use lock_sql::sql::postgres::TableShape;
pub(crate) use lock_sql::sql::postgres::{add_extension_columns, create_table, shape_of};

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
        .query_typed(sql::COLUMNS_QUERY, &[(&table.qualified, Type::TEXT)])
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
    // Unnamed, as `find`: a named statement could collide behind PgBouncer with one another
    // client left on the same server connection.
    let key = sql::ensure_schema_lock_key(table);
    tx.query_typed(sql::ENSURE_SCHEMA_LOCK, &[(&key, Type::TEXT)])
        .await?;
    let columns = match find(&*tx, table).await? {
        Found::Missing => None,
        Found::Present(columns) => Some(columns),
    };
    if let Some(ddl) = sql::schema_change(table, columns.as_deref()) {
        tx.batch_execute(&ddl).await?;
    }
    tx.commit().await
}
