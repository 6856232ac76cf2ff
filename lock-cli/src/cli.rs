//! The command line, as clap parses it.

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand};

/// `lockctl`: see who holds which scheduler lock and release one by hand; see the cluster's
/// jobs, runs and instances, and pause, resume or trigger a job.
#[derive(Debug, Parser)]
#[command(
    name = "lockctl",
    version,
    about = "List and release scheduler locks (ShedLock-compatible tables); show, pause, resume and trigger the cluster's jobs",
    after_help = "URLs: postgres://user:password@host:port/db (or postgresql://), \
                  mysql://user:password@host:port/db (or mariadb://), sqlite:///abs/path.db or \
                  sqlite://relative.db, redis://[user:password@]host:port/db (or rediss://); \
                  the SQL ones behind sqlx+ (sqlx+postgres://...) for the sqlx provider on the \
                  same table\n\
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

    /// The lock table, `table` or `schema.table`; for Redis, the key prefix (`billing:locks`).
    #[arg(
        long,
        global = true,
        env = "LOCKCTL_TABLE",
        hide_env_values = true,
        default_value = lock_providers::DEFAULT_TABLE,
        value_name = "NAME"
    )]
    pub(crate) table: String,

    /// How long connecting to the database may take, and then each of its answers: a server
    /// that accepts the connection and stops answering is an error after this, not a hang.
    #[arg(
        long,
        global = true,
        env = "LOCKCTL_TIMEOUT",
        default_value = "10s",
        value_parser = parse_timeout,
        value_name = "DURATION"
    )]
    pub(crate) timeout: std::time::Duration,

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
    /// Show every job of the cluster (from the job registry): trigger, next fire, last run and
    /// its outcome, paused or not, live instances, and whether a fire was missed.
    Status {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// A job whose next fire passed by more than this without a run is missed.
        #[arg(long, default_value = "60s", value_parser = parse_grace, value_name = "DURATION")]
        grace: std::time::Duration,
    },
    /// Show a job's runs, newest first: slot, fire kind, instance, fence, start, end, outcome
    /// (a run whose instance died shows as `unfinished`), error.
    History {
        /// The job's name, as `status` shows it.
        name: String,
        /// How many runs.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Print each run followed by its log lines (the events its body logged, as the
        /// scheduler's `run_logs` setting kept them); in `--json`, each run's `logs`.
        #[arg(long)]
        logs: bool,
    },
    /// Show a job's action log, newest first: who paused, resumed, triggered it or released
    /// its lock (by `lockctl` or the dashboard), when, and the detail.
    Actions {
        /// The job's name (or, for the release of a lock no job runs under, the lock's name).
        name: String,
        /// How many rows.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Pause a job cluster-wide: every instance refuses its fires from its next heartbeat,
    /// also after restarts, until `resume`.
    Pause {
        /// The job's name, as `status` shows it.
        name: String,
    },
    /// End a job's pause.
    Resume {
        /// The job's name.
        name: String,
    },
    /// Run a job once now, on one live instance, under its lock (after the current run if
    /// one holds it); waits up to 5 s for an instance to claim the request.
    Trigger {
        /// The job's name, as `status` shows it.
        name: String,
        /// A parameter of the run, `key=value` (repeatable): the body reads it with
        /// `JobContext::params()`; kept in the history and the action log. Keys are
        /// `[A-Za-z0-9_.-]`, at most 64 bytes, each given once; values have no control
        /// characters, at most 1000 bytes; at most 32 parameters.
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
    },
    /// Show every instance in the registry: alive or gone, host, pid, version, last
    /// heartbeat, clock offset, jobs.
    Instances {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Serve the web dashboard (jobs, runs, instances, locks; JSON under /api) until Ctrl-C
    /// or SIGTERM.
    ///
    /// Read-only unless a token is given: a viewer token reads, an operator also pauses,
    /// resumes and triggers, an admin also unlocks; whoever logs in with (or sends
    /// `Authorization: Bearer`) its secret may do what its role may, and each action is logged
    /// with the token's name. Listening beyond loopback, every read needs a token too.
    Serve {
        /// The address to listen on; loopback by default.
        #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
        listen: std::net::SocketAddr,
        #[command(flatten)]
        access: ServeAccess,
        /// A job whose next fire passed by more than this without a run is shown as missed.
        #[arg(long, default_value = "60s", value_parser = parse_grace, value_name = "DURATION")]
        grace: std::time::Duration,
        /// How often the pages refresh themselves (0s: never).
        #[arg(long, default_value = "5s", value_parser = parse_refresh, value_name = "DURATION")]
        refresh: std::time::Duration,
    },
}

/// Who may read and act on `serve`'s dashboard, and which host names it answers.
#[derive(Debug, Args)]
pub(crate) struct ServeAccess {
    /// A token, NAME=SECRET (an admin) or NAME:ROLE=SECRET (ROLE: viewer, operator, admin;
    /// secret: 16 bytes or more); repeat it for several. It shows in `ps`: prefer
    /// --token-file or LOCKCTL_DASHBOARD_TOKENS (comma-separated, the same form).
    #[arg(long = "token", value_parser = TokenParser, value_name = "NAME[:ROLE]=SECRET")]
    pub(crate) tokens: Vec<lock_dashboard::Token>,
    /// A file of tokens, one NAME=SECRET or NAME:ROLE=SECRET a line (`#` starts a comment);
    /// keep it readable by its owner only.
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<PathBuf>,
    /// A host name the dashboard answers besides IP addresses and localhost (the name in the
    /// browser's address bar, a reverse proxy's); repeat it for several. Any other name is
    /// refused (DNS rebinding).
    #[arg(long = "allow-host", value_parser = parse_host, value_name = "NAME")]
    pub(crate) allowed_hosts: Vec<String>,
    /// Let anyone who reaches the address read every page and JSON endpoint, also when
    /// listening beyond loopback (where reads need a token by default).
    #[arg(long, conflicts_with = "require_auth")]
    pub(crate) public_reads: bool,
    /// Make every read need a token, also on loopback.
    #[arg(long)]
    pub(crate) require_auth: bool,
}

/// A `--token` value, refused without repeating it: the value may be a secret.
#[derive(Clone)]
struct TokenParser;

impl TypedValueParser for TokenParser {
    type Value = lock_dashboard::Token;

    fn parse_ref(
        &self,
        _: &clap::Command,
        _: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<lock_dashboard::Token, clap::Error> {
        let refused =
            |why: String| clap::Error::raw(ErrorKind::ValueValidation, format!("--token: {why}\n"));
        value
            .to_str()
            .ok_or_else(|| refused("not UTF-8".to_owned()))?
            .parse()
            .map_err(|e: lock_dashboard::TokenError| refused(e.to_string()))
    }
}

/// A DNS name without a port: letters, digits, `-` and `.`.
fn parse_host(value: &str) -> Result<String, String> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    match ok {
        true => Ok(value.to_owned()),
        false => Err("a host name (letters, digits, `-`, `.`), without a port".to_owned()),
    }
}

fn parse_refresh(value: &str) -> Result<std::time::Duration, String> {
    if value.trim() == "0" || value.trim() == "0s" {
        return Ok(std::time::Duration::ZERO);
    }
    lock_scheduler::parse_duration(value).map_err(|e| e.to_string())
}

fn parse_timeout(value: &str) -> Result<std::time::Duration, String> {
    match lock_scheduler::parse_duration(value) {
        Ok(timeout) if timeout.is_zero() => Err("a timeout must be longer than zero".to_owned()),
        parsed => parsed.map_err(|e| e.to_string()),
    }
}

fn parse_grace(value: &str) -> Result<std::time::Duration, String> {
    lock_scheduler::parse_duration(value).map_err(|e| e.to_string())
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

    #[test]
    fn the_cluster_commands_parse_with_their_defaults() {
        let status = Cli::try_parse_from(["lockctl", "status", "--json"]).unwrap();
        assert!(matches!(
            status.command,
            Command::Status { json: true, grace } if grace == std::time::Duration::from_secs(60)
        ));
        let history =
            Cli::try_parse_from(["lockctl", "history", "report", "--limit", "5"]).unwrap();
        assert!(matches!(
            history.command,
            Command::History { ref name, limit: 5, json: false, logs: false } if name == "report"
        ));
        let history = Cli::try_parse_from(["lockctl", "history", "report"]).unwrap();
        assert!(matches!(
            history.command,
            Command::History { limit: 20, .. }
        ));
        assert!(Cli::try_parse_from(["lockctl", "status", "--grace", "soon"]).is_err());
        assert!(Cli::try_parse_from(["lockctl", "trigger"]).is_err());
    }

    #[test]
    fn serve_listens_on_loopback_unless_told_and_takes_tokens() {
        let serve = Cli::try_parse_from(["lockctl", "serve"]).unwrap();
        assert!(matches!(
            serve.command,
            Command::Serve { listen, ref access, .. }
                if listen == "127.0.0.1:8080".parse().unwrap() && access.tokens.is_empty()
                    && !access.public_reads && !access.require_auth
        ));
        let serve = Cli::try_parse_from([
            "lockctl",
            "serve",
            "--listen",
            "0.0.0.0:9000",
            "--token",
            "alice=0123456789abcdef",
            "--token",
            "bob:viewer=fedcba9876543210",
            "--allow-host",
            "ops.example",
            "--public-reads",
            "--refresh",
            "0s",
        ])
        .unwrap();
        let Command::Serve {
            listen,
            access,
            refresh,
            ..
        } = serve.command
        else {
            panic!("not serve");
        };
        assert_eq!(listen.port(), 9000);
        assert_eq!(
            access
                .tokens
                .iter()
                .map(|t| (t.name(), t.role()))
                .collect::<Vec<_>>(),
            [
                ("alice", lock_dashboard::Role::Admin),
                ("bob", lock_dashboard::Role::Viewer)
            ]
        );
        assert_eq!(access.allowed_hosts, ["ops.example"]);
        assert!(access.public_reads);
        assert_eq!(refresh, std::time::Duration::ZERO);
        assert!(Cli::try_parse_from(["lockctl", "serve", "--token", "alice=short"]).is_err());
        // A value without `=` may be a secret: the error does not repeat it.
        let error = Cli::try_parse_from(["lockctl", "serve", "--token", "s3cr3t-0123456789abcdef"])
            .unwrap_err()
            .to_string();
        assert!(!error.contains("s3cr3t"), "{error}");
        assert!(Cli::try_parse_from(["lockctl", "serve", "--allow-host", "a.example:80"]).is_err());
        assert!(
            Cli::try_parse_from(["lockctl", "serve", "--public-reads", "--require-auth"]).is_err()
        );
        assert!(Cli::try_parse_from(["lockctl", "serve", "--listen", "localhost"]).is_err());
    }
}
