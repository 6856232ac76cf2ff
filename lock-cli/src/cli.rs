//! The command line, as clap parses it.

use clap::{Parser, Subcommand};

/// `lockctl`: see who holds which scheduler lock, and release one by hand.
#[derive(Debug, Parser)]
#[command(
    name = "lockctl",
    version,
    about = "List and release scheduler locks (ShedLock-compatible tables)",
    after_help = "URLs: postgres://user:password@host:port/db (or postgresql://), \
                  mysql://user:password@host:port/db (or mariadb://), sqlite:///abs/path.db or \
                  sqlite://relative.db; any of them behind sqlx+ (sqlx+postgres://...) for the \
                  sqlx provider on the same table\n\
                  Exit codes: 0 done, 1 failed at run time (server unreachable, table or lock \
                  missing), 2 usage error (bad arguments or URL, unlock without --force)."
)]
pub(crate) struct Cli {
    /// The lock database; a password in it is never printed.
    // Not `required`: clap refuses required global arguments, so main checks it is there.
    #[arg(
        long,
        global = true,
        env = "LOCKCTL_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) url: Option<String>,

    /// The lock table, `table` or `schema.table`.
    #[arg(
        long,
        global = true,
        env = "LOCKCTL_TABLE",
        hide_env_values = true,
        default_value = lock_core::DEFAULT_TABLE,
        value_name = "NAME"
    )]
    pub(crate) table: String,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What to do with the lock table.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show every lock: held or free, by whom, until when, its fence and last fire (UTC).
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// End a lock whatever its holder (lock_until = now); prints the lock as it was.
    ///
    /// Without --force it only shows the lock and refuses (exit code 2): a job may still be
    /// running under it, and releasing the lock lets another instance start the same job.
    /// Fence and last fire are kept, so a released slot does not run twice.
    Unlock {
        /// The lock's name, as `list` shows it.
        name: String,
        /// Really release it.
        #[arg(long)]
        force: bool,
    },
    /// Repair a last fire in the future (last_fire = the database's now); prints the lock as
    /// it was.
    ///
    /// A last fire ahead of the database's clock (written by a version before 0.2 on a host
    /// whose clock was ahead) makes every instance skip the job until the database reaches it:
    /// days, or years. Without --force it only shows the lock, how far ahead its last fire is,
    /// and refuses (exit code 2). A last fire in the past is never changed, so no slot that
    /// ran can run again.
    ResetSlot {
        /// The lock's name, as `list` shows it.
        name: String,
        /// Really reset it.
        #[arg(long)]
        force: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_go_before_or_after_the_subcommand() {
        let before = Cli::try_parse_from(["lockctl", "--url", "sqlite://a.db", "list"]).unwrap();
        let after = Cli::try_parse_from([
            "lockctl",
            "unlock",
            "x",
            "--force",
            "--url",
            "sqlite://a.db",
        ])
        .unwrap();
        assert_eq!(before.url.as_deref(), Some("sqlite://a.db"));
        assert_eq!(after.url.as_deref(), Some("sqlite://a.db"));
        assert_eq!(before.table, "shedlock");
        assert!(matches!(after.command, Command::Unlock { force: true, .. }));
        let reset = Cli::try_parse_from(["lockctl", "reset-slot", "x", "--force"]).unwrap();
        assert!(matches!(
            reset.command,
            Command::ResetSlot { force: true, .. }
        ));
    }
}
