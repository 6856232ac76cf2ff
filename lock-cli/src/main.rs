#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod action_log;
mod cli;
mod http_server;
mod operations;
mod output;
mod serve;
mod tables;
mod target;
mod terminal;

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, error::ErrorKind};
use lock_core::{LockError, LockRecord, validate_stored_lock_name};

use cli::{Cli, Command};
use lock_providers::OpenedProvider;

/// Why lockctl stops without doing what was asked, and the exit code that says so.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The command as typed can never succeed; fix it (exit code 2).
    Usage(String),
    /// Something failed at run time: server, table or lock (exit code 1).
    Runtime {
        context: String,
        cause: Option<LockError>,
    },
}

impl Failure {
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure::Usage(message.into())
    }

    pub(crate) fn runtime(context: impl Into<String>, cause: LockError) -> Self {
        Failure::Runtime {
            context: context.into(),
            cause: Some(cause),
        }
    }

    pub(crate) fn runtime_message(context: impl Into<String>) -> Self {
        Failure::Runtime {
            context: context.into(),
            cause: None,
        }
    }

    /// A failed operation on the table; a name refused by the provider is the caller's
    /// mistake, anything else happened at run time.
    fn from_operation(context: String, error: LockError) -> Self {
        match error {
            LockError::InvalidLockName { .. } => Failure::usage(error.to_string()),
            error => Failure::runtime(context, error),
        }
    }

    fn exit_code(&self) -> ExitCode {
        match self {
            Failure::Usage(_) => ExitCode::from(2),
            Failure::Runtime { .. } => ExitCode::from(1),
        }
    }

    /// The message for stderr: what failed, then the error and each of its sources.
    fn report(&self) -> String {
        let (context, cause) = match self {
            Failure::Usage(message) => return format!("error: {message}\n"),
            Failure::Runtime { context, cause } => (context, cause),
        };
        let mut out = format!("error: {context}\n");
        let source: Option<&(dyn Error + 'static)> = match cause {
            Some(LockError::TableMissing {
                table, ddl, source, ..
            }) => {
                // The DDL on its own lines, ready to copy into a migration.
                out.push_str(&format!(
                    "  lock table {table} does not exist (check --table); a service creates it \
                     with ensure_schema(), or run:\n\n{ddl}\n\n"
                ));
                source.as_deref().map(|e| e as &(dyn Error + 'static))
            }
            // A table-wide operation names no lock: say what failed where, without `lock ""`.
            Some(LockError::Provider {
                operation,
                lock,
                backend,
                source,
            }) if lock.is_empty() => {
                out.push_str(&format!("  {operation} failed on {backend}\n"));
                Some(source.as_ref() as &(dyn Error + 'static))
            }
            Some(error) => {
                out.push_str(&format!("  {error}\n"));
                error.source()
            }
            None => None,
        };
        let mut shown = String::new();
        let mut next = source;
        while let Some(error) = next {
            let text = error.to_string();
            // Many drivers repeat their source in their own message; print each text once.
            if !shown.contains(&text) {
                out.push_str(&format!("  caused by: {text}\n"));
                shown = text;
            }
            next = error.source();
        }
        out
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(url) = cli.url.as_deref() else {
        // Clap's own wording and exit code (2) for a missing argument.
        Cli::command()
            .error(
                ErrorKind::MissingRequiredArgument,
                "the lock database is required: pass --url URL or set LOCKCTL_URL",
            )
            .exit()
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(url, &cli.table, cli.timeout, &cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprint!("{}", terminal::lines(&failure.report()));
            failure.exit_code()
        }
    }
}

async fn run(
    url: &str,
    table: &str,
    timeout: std::time::Duration,
    command: &Command,
) -> Result<(), Failure> {
    // Everything that can be checked without a server is, so a typing mistake never connects.
    let database = target::parse(url)?;
    // By the provider's rule: an SQL table name, or a Redis key prefix (`billing:locks`).
    database
        .check_table(table)
        .map_err(|e| Failure::usage(format!("--table: {e}")))?;
    // Only what no row can have is refused: a row written by ShedLock in Java or an older
    // version may have a name today's rule refuses (a newline), and must stay releasable.
    if let Command::Unlock { name, .. } | Command::ResetSlot { name, .. } = command {
        validate_stored_lock_name(name).map_err(|e| Failure::usage(e.to_string()))?;
    }
    if let Command::History { name, .. }
    | Command::Actions { name, .. }
    | Command::Pause { name }
    | Command::Resume { name }
    | Command::Trigger { name, .. } = command
    {
        operations::validate_job_name(name)?;
    }
    if let Command::Trigger { params, .. } = command {
        operations::trigger_params(params)?;
    }
    let access = match command {
        Command::Serve { listen, access, .. } => Some(serve::Access::settle(access, *listen)?),
        _ => None,
    };
    let serving = access.is_some();
    let opened = target::open(&database, table, timeout, serving).await?;
    let result = execute(&opened, command, access.as_ref()).await;
    opened.close().await;
    result
}

async fn execute(
    opened: &OpenedProvider,
    command: &Command,
    access: Option<&serve::Access>,
) -> Result<(), Failure> {
    let provider = opened.provider();
    let table = provider.describe();
    match command {
        Command::List { json } => {
            let records = provider.list_locks().await.map_err(|e| {
                Failure::from_operation(format!("cannot list the locks in {table}"), e)
            })?;
            print(&if *json {
                output::json(&records)
            } else {
                output::table(&records)
            });
            Ok(())
        }
        Command::Unlock { name, force: false } => {
            // A dry run: show what --force would release, then refuse.
            let records = provider.list_locks().await.map_err(|e| {
                Failure::from_operation(format!("cannot read lock {name:?} in {table}"), e)
            })?;
            let record = records
                .into_iter()
                .find(|r| r.name == *name)
                .ok_or_else(|| no_such_lock(name, &table))?;
            print(&output::table(std::slice::from_ref(&record)));
            // The dashboard shows the same warning above its release button; the holder in it
            // escaped, as in the table.
            let mut shown = record.clone();
            shown.locked_by = terminal::visible(&record.locked_by).into_owned();
            let mut why = lock_dashboard::unlock_warning(&shown);
            if record.held {
                why.push_str("\n  Add --force to release it anyway.");
            }
            Err(Failure::usage(format!(
                "refusing to release lock {name:?} without --force\n  {why}"
            )))
        }
        Command::Unlock { name, force: true } => {
            let before = provider.force_unlock(name).await.map_err(|e| {
                Failure::from_operation(format!("cannot release lock {name:?} in {table}"), e)
            })?;
            let before = before.ok_or_else(|| no_such_lock(name, &table))?;
            action_log::record_unlock(provider.as_ref(), &before).await;
            print(&released(&before));
            Ok(())
        }
        Command::ResetSlot { name, force } => reset_slot(provider, name, *force, &table).await,
        Command::Status { json, grace } => {
            print(&operations::status(provider.as_ref(), *json, *grace).await?);
            Ok(())
        }
        Command::History {
            name,
            limit,
            json,
            logs,
        } => {
            let output = if *logs {
                operations::history_with_logs(provider.as_ref(), name, *limit, *json).await?
            } else {
                operations::history(provider.as_ref(), name, *limit, *json).await?
            };
            print(&output);
            Ok(())
        }
        Command::Actions { name, limit, json } => {
            print(&action_log::actions(provider.as_ref(), name, *limit, *json).await?);
            Ok(())
        }
        Command::Pause { name } => {
            print(&operations::pause(provider.as_ref(), name).await?);
            Ok(())
        }
        Command::Resume { name } => {
            print(&operations::resume(provider.as_ref(), name).await?);
            Ok(())
        }
        Command::Trigger { name, params } => {
            let params = operations::trigger_params(params)?;
            print(&operations::trigger(provider.as_ref(), name, &params).await?);
            Ok(())
        }
        Command::Instances { json } => {
            print(&operations::instances(provider.as_ref(), *json).await?);
            Ok(())
        }
        Command::Serve {
            listen,
            grace,
            refresh,
            ..
        } => {
            let access = access.expect("settled in run() for serve");
            serve::run(provider.clone(), *listen, access, *grace, *refresh).await
        }
    }
}

/// `reset-slot NAME [--force]`: a last fire ahead of the database's clock is brought back to
/// its now; without `--force`, show how far ahead it is and refuse.
async fn reset_slot(
    provider: &dyn lock_core::LockProvider,
    name: &str,
    force: bool,
    table: &str,
) -> Result<(), Failure> {
    let now = provider.database_time().await.map_err(|e| {
        Failure::from_operation(format!("cannot read the database's clock for {table}"), e)
    })?;
    let ahead = |record: &LockRecord| {
        record
            .last_fire
            .filter(|last| *last > now)
            .map(|last| (last - now).as_seconds_f64())
    };
    let at = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
    if !force {
        let record = provider
            .read_lock(name)
            .await
            .map_err(|e| {
                Failure::from_operation(format!("cannot read lock {name:?} in {table}"), e)
            })?
            .ok_or_else(|| no_such_lock(name, table))?;
        print(&output::table(std::slice::from_ref(&record)));
        let why = match ahead(&record) {
            Some(seconds) => format!(
                "its last fire is {} ahead of the database's clock ({}): every instance \
                 skips the job until then.\n  Add --force to set it to the database's now; the \
                 next slot then runs.",
                span(seconds),
                at(now)
            ),
            None => format!(
                "its last fire is not ahead of the database's clock ({}): there is nothing to                  repair.",
                at(now)
            ),
        };
        return Err(Failure::usage(format!(
            "refusing to reset the last fire of lock {name:?} without --force\n  {why}"
        )));
    }
    let before = provider
        .reset_slot(name)
        .await
        .map_err(|e| Failure::from_operation(format!("cannot reset lock {name:?} in {table}"), e))?
        .ok_or_else(|| no_such_lock(name, table))?;
    let headline = match (ahead(&before), before.last_fire) {
        (Some(seconds), Some(last)) => format!(
            "reset the last fire of lock {name:?} from {} ({} ahead) to the \
             database's now ({}); it was:\n",
            at(last),
            span(seconds),
            at(now)
        ),
        _ => format!(
            "the last fire of lock {name:?} was not ahead of the database's clock ({}), so it \
             was kept; it was:\n",
            at(now)
        ),
    };
    print(&(headline + &output::table(std::slice::from_ref(&before))));
    Ok(())
}

/// A span of seconds as an operator reads it: `12.345 s`, or `400 days 3 h 2 min`.
fn span(seconds: f64) -> String {
    if seconds < 120.0 {
        return format!("{seconds:.3} s");
    }
    let whole = seconds as u64;
    let (days, hours, minutes) = (whole / 86_400, whole % 86_400 / 3600, whole % 3600 / 60);
    match days {
        0 => format!("{hours} h {minutes} min"),
        _ => format!("{days} days {hours} h {minutes} min"),
    }
}

fn no_such_lock(name: &str, table: &str) -> Failure {
    Failure::runtime_message(format!(
        "there is no lock named {name:?} in {table} (`lockctl list` shows the names)"
    ))
}

/// What `unlock --force` prints: a sentence, then the row as it was before the release.
fn released(before: &LockRecord) -> String {
    let headline = if before.held {
        format!(
            "released lock {:?}, held by {} until {}; it was:\n",
            before.name,
            terminal::visible(&before.locked_by),
            before.lock_until.format("%Y-%m-%dT%H:%M:%S%.3fZ")
        )
    } else {
        format!(
            "lock {:?} was not held, so nothing was released:\n",
            before.name
        )
    };
    headline + &output::table(std::slice::from_ref(before))
}

/// Writes to stdout, with no control or bidi character but its newlines, ignoring a closed pipe (`lockctl list | head -1`) instead of panicking.
fn print(text: &str) {
    let text = terminal::lines(text);
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
