//! The provider's cluster tables as lockctl reaches them, and its failures naming them.

use lock_cluster::{Cluster, ClusterProvider};
use lock_core::LockError;

use crate::Failure;

/// The provider's operations tables, or lockctl's explanation of why there are none.
pub(crate) fn store(provider: &dyn ClusterProvider) -> Result<&dyn Cluster, Failure> {
    provider.cluster().ok_or_else(|| {
        Failure::runtime_message(format!(
            "{} has no operations tables (job registry, run history, pause, trigger): this \
             provider does not keep them, so status, history, pause, resume, trigger and \
             instances are not available for it",
            provider.describe()
        ))
    })
}

/// A failed operation on the operations tables, with the DDL when they are missing.
pub(crate) fn failed(context: String, error: LockError) -> Failure {
    match error {
        LockError::TableMissing { table, ddl, .. } => Failure::runtime_message(format!(
            "{context}\n  the operations tables {table} do not exist: a service creates them \
             with the provider's ensure_schema() (this version), or run:\n\n{ddl}\n"
        )),
        error => Failure::runtime(context, error),
    }
}
