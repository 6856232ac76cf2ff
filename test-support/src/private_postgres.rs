//! A private PostgreSQL cluster for one test: `initdb` into a temporary folder, a server on a
//! free port with trust authentication, frozen (`SIGSTOP` of every process of the cluster),
//! crashed (`pg_ctl -m immediate`), stopped and started at will, so that tests which break the
//! lock database never touch the shared server on 5432.
//!
//! The server binaries come from `LOCK_TEST_POSTGRES_BIN` or the newest
//! `/usr/lib/postgresql/<version>/bin` (Debian's layout). `initdb` and `postgres` refuse to run
//! as root, so when the test runs as root (the test machine, CI) they run as the `postgres`
//! OS user (`runuser -u postgres --`), the temporary folder owned by it.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{expect_success, signal};
use crate::skip::skip_unless_ci;

/// The OS user the server runs as when the test runs as root (Debian's server package makes it).
const OS_USER: &str = "postgres";

/// The database made for the test (and the role of [`PrivatePostgres::url`]).
const DATABASE: &str = "test";

/// How long `pg_ctl` may take to start the server (crash recovery included) or stop it.
const PG_CTL_WAIT_SECONDS: &str = "60";

/// How long every process of a cluster may take to show as stopped after `SIGSTOP`.
const FREEZE_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL server of the test's own on `127.0.0.1:<free port>`, with a data folder of its
/// own. Stopped, and its folder removed, on drop (thawed first if frozen).
///
/// ```no_run
/// use test_support::private_postgres::PrivatePostgres;
/// let Some(mut pg) = PrivatePostgres::start() else { return };
/// println!("{}", pg.url());
/// pg.freeze(); // every process of the cluster stopped: connections hang, nothing answers
/// pg.thaw();
/// pg.restart_immediate(); // a crash: no shutdown checkpoint, recovery from the WAL at start
/// pg.crash(); // the same crash, and the server stays down until started again
/// pg.start_again();
/// pg.stop();
/// pg.start_again();
/// ```
#[derive(Debug)]
pub struct PrivatePostgres {
    bin: PathBuf,
    /// The temporary folder: `data/`, the log, the Unix socket.
    dir: PathBuf,
    port: u16,
    /// Run the server's commands as [`OS_USER`] (the test runs as root).
    as_os_user: bool,
    running: bool,
    frozen: bool,
}

impl PrivatePostgres {
    /// Makes a cluster (`initdb`, trust authentication), starts it on a free port and creates
    /// the database `test`; `None` (after the skip-unless-CI rule) when the server binaries, or
    /// the `postgres` OS user needed under root, are not there.
    pub fn start() -> Option<PrivatePostgres> {
        let Some(bin) = server_binaries() else {
            skip_unless_ci(
                "PostgreSQL server binaries (initdb, pg_ctl) not found: set LOCK_TEST_POSTGRES_BIN \
                 or install Debian's postgresql package (/usr/lib/postgresql/<version>/bin)",
            );
            return None;
        };
        let as_os_user = running_as_root();
        if as_os_user && !os_user_exists() {
            skip_unless_ci(format!(
                "initdb refuses root, and there is no {OS_USER:?} OS user to run it as"
            ));
            return None;
        }
        let port = crate::process::free_port();
        let dir = std::env::temp_dir().join(format!(
            "private-postgres-{}-{port}-{}",
            std::process::id(),
            crate::table::unique_table("d")
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut pg = PrivatePostgres {
            bin,
            dir,
            port,
            as_os_user,
            running: false,
            frozen: false,
        };
        if as_os_user {
            let output = Command::new("chown")
                .arg(format!("{OS_USER}:"))
                .arg(&pg.dir)
                .output()
                .expect("run chown");
            expect_success(&output, "chown of the private PostgreSQL folder");
        }
        pg.init();
        pg.start_again();
        let output = Command::new(pg.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
            .arg(DATABASE)
            .output()
            .expect("run createdb");
        expect_success(&output, "createdb on the private PostgreSQL");
        Some(pg)
    }

    /// `postgres://postgres@127.0.0.1:<port>/test`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's binaries (`psql`, `pg_dump`, ... of the server's version).
    pub fn bin_dir(&self) -> &std::path::Path {
        &self.bin
    }

    /// The data folder.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The postmaster's process id and its children's (backends, checkpointer, WAL writer,
    /// ...), postmaster first; empty when the server is not running.
    pub fn pids(&self) -> Vec<u32> {
        let Some(postmaster) = self.postmaster_pid() else {
            return Vec::new();
        };
        let mut pids = vec![postmaster];
        pids.extend(children(postmaster));
        pids
    }

    /// `SIGSTOP` to every process of the cluster, and waits until each shows as stopped: the
    /// kernel still completes TCP handshakes into the listen queue, but nothing answers, as
    /// with a server that hangs. The postmaster is stopped first, so it forks no new child
    /// after the children are listed.
    pub fn freeze(&mut self) {
        assert!(
            self.running,
            "freeze: the private PostgreSQL is not running"
        );
        let postmaster = self
            .postmaster_pid()
            .expect("freeze: the postmaster's pid (postmaster.pid)");
        // Set first: a freeze that fails halfway is thawed on drop, or the stopped processes
        // would outlive the test (a pending `pg_ctl stop` signal waits for `SIGCONT`).
        self.frozen = true;
        stop_and_wait(postmaster);
        for child in children(postmaster) {
            stop_and_wait(child);
        }
    }

    /// `SIGCONT` to every process of the cluster.
    pub fn thaw(&mut self) {
        for pid in self.pids().into_iter().rev() {
            signal(pid, "CONT");
        }
        self.frozen = false;
    }

    /// `pg_ctl -m immediate stop` (a crash: every process quits at once, no shutdown
    /// checkpoint), then starts the server again on the same port and data, which recovers
    /// from the WAL; returns once it accepts connections.
    pub fn restart_immediate(&mut self) {
        self.crash();
        self.start_again();
    }

    /// `pg_ctl -m immediate stop` alone: the server is down, as after a crash, until
    /// [`start_again`](Self::start_again) (thawed first if frozen).
    pub fn crash(&mut self) {
        self.stop_with("immediate");
    }

    /// `pg_ctl -m fast stop`: sessions are ended, the server shuts down cleanly (thawed first
    /// if frozen).
    pub fn stop(&mut self) {
        self.stop_with("fast");
    }

    /// Starts the (stopped) server on its port and data; returns once it accepts connections.
    pub fn start_again(&mut self) {
        let log = self.dir.join("server.log");
        let output = self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", PG_CTL_WAIT_SECONDS, "start"])
            .output()
            .expect("run pg_ctl start");
        if !output.status.success() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            panic!(
                "pg_ctl start of the private PostgreSQL on port {} failed: {}\n{}\n{text}",
                self.port,
                crate::process::stderr(&output),
                crate::process::stdout(&output)
            );
        }
        self.running = true;
    }

    /// The server's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn stop_with(&mut self, mode: &str) {
        if self.frozen {
            self.thaw();
        }
        let output = self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", mode, "-w", "-t", PG_CTL_WAIT_SECONDS, "stop"])
            .output()
            .expect("run pg_ctl stop");
        expect_success(&output, &format!("pg_ctl -m {mode} stop"));
        self.running = false;
    }

    fn init(&self) {
        let output = self
            .server_command("initdb")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"])
            // A test's cluster needs no durability against a host crash; a process crash
            // (`-m immediate`) loses nothing with fsync off, the WAL being in the OS's cache.
            .args(["--no-sync", "--no-instructions"])
            .output()
            .expect("run initdb");
        expect_success(&output, "initdb of the private PostgreSQL");
        let settings = format!(
            "\n# private_postgres.rs\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nfsync = off\nshared_buffers = 16MB\n",
            self.port,
            self.dir.display()
        );
        let conf = self.data_dir().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf)
            .unwrap_or_else(|e| panic!("read {}: {e}", conf.display()));
        text.push_str(&settings);
        // Written in place, so the file keeps its owner.
        std::fs::write(&conf, text).unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
    }

    /// A server program, run as [`OS_USER`] when the test runs as root, in the cluster's folder
    /// (the test's own working directory may be closed to that user).
    fn server_command(&self, program: &str) -> Command {
        let mut command = if self.as_os_user {
            let mut command = Command::new("runuser");
            command
                .args(["-u", OS_USER, "--"])
                .arg(self.bin.join(program));
            command
        } else {
            Command::new(self.bin.join(program))
        };
        command.current_dir(&self.dir);
        command
    }

    fn postmaster_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if self.frozen {
            self.thaw();
        }
        if self.running {
            let _ = self
                .server_command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .args(["-m", "immediate", "-w", "-t", PG_CTL_WAIT_SECONDS, "stop"])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `LOCK_TEST_POSTGRES_BIN`, or the newest `/usr/lib/postgresql/<version>/bin` with `initdb`.
fn server_binaries() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("LOCK_TEST_POSTGRES_BIN") {
        return Some(PathBuf::from(dir)).filter(|dir| dir.join("initdb").exists());
    }
    let versions = std::fs::read_dir("/usr/lib/postgresql").ok()?;
    versions
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version)
        .map(|(_, bin)| bin)
}

/// `/proc/self` belongs to the process's effective user.
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

fn os_user_exists() -> bool {
    Command::new("id")
        .arg(OS_USER)
        .output()
        .is_ok_and(|output| output.status.success())
}

/// The direct children of `pid` (the postmaster is single-threaded: its main task has them all).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|child| child.parse().ok())
        .collect()
}

/// The state letter of `/proc/<pid>/stat` (`T` once stopped), after the `(comm)` field.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// `SIGSTOP`, then waits until the process shows as stopped, or has gone: exited (a zombie,
/// `Z`, which the stopped postmaster cannot reap, like a backend whose session just ended) or
/// reaped.
fn stop_and_wait(pid: u32) {
    signal(pid, "STOP");
    let deadline = Instant::now() + FREEZE_TIMEOUT;
    while !matches!(state(pid), Some('T' | 'Z' | 'X') | None) {
        assert!(
            Instant::now() < deadline,
            "process {pid} of the private PostgreSQL did not stop within {FREEZE_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
