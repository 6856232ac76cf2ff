//! The lock table: its name, DDL and the checks of an existing table's shape are the provider
//! kit's ([`lock_sql::sql::mysql`]); what is mysql_async's is the type a catalog row is
//! decoded into.

pub(crate) use lock_sql::sql::mysql::{COLUMNS_QUERY, Column, ColumnInfo, Shape, Table};

/// [`COLUMNS_QUERY`]'s row as the driver decodes it.
pub(crate) type ColumnRow = (String, String, Option<u64>, Option<String>, String, String);

/// One row of [`COLUMNS_QUERY`] as the kit reads it.
pub(crate) fn column_info(
    (name, data_type, precision, collation, key, extra): ColumnRow,
) -> ColumnInfo {
    ColumnInfo {
        name,
        data_type,
        precision,
        collation,
        key,
        extra,
    }
}
