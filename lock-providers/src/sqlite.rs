//! `sqlite://`: [`SqliteLockProvider`].

use std::fmt;
use std::path::PathBuf;

use async_trait::async_trait;
use lock_provider_sqlite::SqliteLockProvider;

use crate::database::Database;
use crate::{OpenError, OpenOptions, OpenedProvider, UrlError};

/// A SQLite database file: `sqlite:///absolute/path.db` or `sqlite://relative.db`.
#[derive(Debug)]
pub(crate) struct Sqlite {
    path: PathBuf,
}

pub(crate) fn parse(_scheme: &str, rest: &str) -> Result<Box<dyn Database>, UrlError> {
    if rest.is_empty() {
        return Err(UrlError::new(
            "sqlite:// names no file (sqlite:///absolute/path.db or sqlite://relative.db)"
                .to_owned(),
        ));
    }
    Ok(Box::new(Sqlite {
        path: PathBuf::from(rest),
    }))
}

#[async_trait]
impl Database for Sqlite {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    async fn open(&self, options: &OpenOptions) -> Result<OpenedProvider, OpenError> {
        // Opening a SQLite path creates the file.
        if !options.creates_missing() && !self.path.is_file() {
            return Err(OpenError::Missing {
                database: self.to_string(),
            });
        }
        let provider = SqliteLockProvider::open(&self.path)
            .map_err(|e| OpenError::unreachable(format!("cannot open {self}"), e))?
            .with_table(options.table_name())
            .map_err(OpenError::Table)?;
        options.ensure_schema(provider.ensure_schema()).await?;
        Ok(OpenedProvider::new(provider))
    }
}

impl fmt::Display for Sqlite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the SQLite database {}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use lock_core::LockError;
    use lock_provider_sqlite::SqliteLockProvider;

    use crate::{LockDatabase, OpenError, OpenOptions, SchemaAction};

    #[test]
    fn absolute_and_relative_paths_are_kept_as_written() {
        let described = |url: &str| LockDatabase::parse(url).unwrap().to_string();
        assert_eq!(
            described("sqlite:///var/lib/app/locks.db"),
            "the SQLite database /var/lib/app/locks.db"
        );
        assert_eq!(
            described("sqlite://locks.db"),
            "the SQLite database locks.db"
        );
    }

    #[tokio::test]
    async fn a_missing_file_is_created_only_when_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks.db");
        let database = LockDatabase::parse(&format!("sqlite://{}", path.display())).unwrap();
        let refused = database
            .open(&OpenOptions::new().create_if_missing(false))
            .await
            .unwrap_err();
        assert!(matches!(refused, OpenError::Missing { .. }), "{refused:?}");
        assert!(!path.exists());

        let opened = database
            .open(&OpenOptions::new().schema(SchemaAction::Create))
            .await
            .unwrap();
        assert!(path.is_file());
        assert!(opened.provider().list_locks().await.unwrap().is_empty());
        assert!(opened.downcast_ref::<SqliteLockProvider>().is_some());
        opened.close().await;
    }

    #[tokio::test]
    async fn check_refuses_a_missing_table_with_its_ddl() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("locks.db").display());
        let options = OpenOptions::new()
            .table("no_such_table")
            .schema(SchemaAction::Check);
        match options.open(&url).await {
            Err(OpenError::Schema(LockError::TableMissing { table, ddl, .. })) => {
                assert_eq!(table, "no_such_table");
                assert!(ddl.contains("CREATE TABLE"), "{ddl}");
            }
            other => panic!("{other:?}"),
        }
        let refused = OpenOptions::new()
            .table("locks; DROP TABLE users")
            .open(&url)
            .await;
        assert!(matches!(refused, Err(OpenError::Table(_))), "{refused:?}");
    }
}
