//! One row of the runs table, [`Run`], and its decoding: written once for every driver.

/// The runs table's columns, in the order [`Run::decode`] reads them.
pub(super) const COLUMNS: &str = "id, job, instance, slot, fence, started, ended, cancelled, first_write, late_write, kind, \
     attempt";

/// One row of the runs table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Insertion order.
    pub id: i64,
    /// The lock name of the job.
    pub job: String,
    /// The instance that ran it (`locked_by`).
    pub instance: String,
    /// The fire's scheduled instant in Unix milliseconds (`None` for fixed-delay jobs).
    pub slot: Option<i64>,
    /// The fencing token of the lease the run held.
    pub fence: i64,
    /// When the body started, Unix milliseconds by the database's clock.
    pub started: i64,
    /// When the body ended (`None`: still running, or its process died).
    pub ended: Option<i64>,
    /// Whether `JobContext::cancelled()` had resolved when the body ended.
    pub cancelled: bool,
    /// Rows changed by the body's fenced write at its start, if it made one.
    pub first_write: Option<i64>,
    /// Rows changed by the body's fenced write at its end, if it made one.
    pub late_write: Option<i64>,
    /// The fire kind (`Scheduled`, `CatchUp`, `Manual`), when the job records it.
    pub kind: Option<String>,
    /// Which attempt of the run (`JobContext::attempt`), when the job records it.
    pub attempt: Option<i64>,
}

/// A value every driver can read from a column: `i64`, `String`, `bool` and their options.
pub(super) trait Column:
    for<'a> tokio_postgres::types::FromSql<'a>
    + rusqlite::types::FromSql
    + mysql_async::prelude::FromValue
{
}

impl<T> Column for T where
    T: for<'a> tokio_postgres::types::FromSql<'a>
        + rusqlite::types::FromSql
        + mysql_async::prelude::FromValue
{
}

/// A driver's result row, read by column index.
pub(super) trait RunRow {
    /// The driver's error for a missing column or a value of another type.
    type Error;

    /// The value at `index` (0-based).
    fn column<T: Column>(&self, index: usize) -> Result<T, Self::Error>;
}

impl Run {
    /// A row selected with [`COLUMNS`].
    pub(super) fn decode<R: RunRow>(row: &R) -> Result<Run, R::Error> {
        Ok(Run {
            id: row.column(0)?,
            job: row.column(1)?,
            instance: row.column(2)?,
            slot: row.column(3)?,
            fence: row.column(4)?,
            started: row.column(5)?,
            ended: row.column(6)?,
            cancelled: row.column(7)?,
            first_write: row.column(8)?,
            late_write: row.column(9)?,
            kind: row.column(10)?,
            attempt: row.column(11)?,
        })
    }
}
