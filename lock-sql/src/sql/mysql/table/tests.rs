use super::*;
use crate::MAX_LOCK_NAME_LEN;

fn rows(columns: &[(&str, &str)]) -> Vec<ColumnInfo> {
    columns
        .iter()
        .map(|(n, t)| ColumnInfo {
            name: n.to_string(),
            data_type: t.to_string(),
            precision: matches!(*t, "datetime" | "timestamp").then_some(3),
            collation: None,
            key: String::new(),
            extra: String::new(),
        })
        .collect()
}

#[test]
fn the_name_column_holds_the_longest_lock_name() {
    assert_eq!(NAME_TYPE, format!("VARBINARY({MAX_LOCK_NAME_LEN})"));
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
