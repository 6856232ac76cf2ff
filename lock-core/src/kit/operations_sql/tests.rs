use super::*;
use crate::kit::LockTableConfig;

#[test]
fn schema_qualified_tables_and_their_indexes() {
    let config = LockTableConfig::default().with_table("main.job_locks");
    let sqlite = OperationsSql::new(
        SqlDialect::Sqlite,
        &config.resolve(IdentifierStyle::ANSI).unwrap(),
    )
    .unwrap();
    assert!(sqlite.create.contains(
        &r#"CREATE INDEX IF NOT EXISTS "main"."job_locks_runs_job" ON "job_locks_runs" (job_name, id)"#
            .to_owned()
    ));
    let config = LockTableConfig::default().with_table("ops.job_locks");
    let postgres = OperationsSql::new(
        SqlDialect::Postgres,
        &config.resolve(IdentifierStyle::POSTGRES).unwrap(),
    )
    .unwrap();
    assert!(postgres.create.contains(
        &r#"CREATE INDEX IF NOT EXISTS "job_locks_runs_started" ON "ops"."job_locks_runs" (started_at)"#
            .to_owned()
    ));
    assert_eq!(postgres.tables.control, "ops.job_locks_control");
}

#[test]
fn a_lock_table_name_too_long_for_the_derived_names_is_refused() {
    let name = "t".repeat(60);
    let config = LockTableConfig::default().with_table(name);
    let error = OperationsSql::new(
        SqlDialect::MySql,
        &config.resolve(IdentifierStyle::MYSQL).unwrap(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("_instances"), "{error}");
}
