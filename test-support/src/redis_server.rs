//! A private `redis-server` for one test: its own port and directory, killed and restarted at
//! will, so that tests which restart Redis or change its configuration never disturb the
//! shared server other suites use.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian puts the server; `redis-server` on the `PATH` otherwise.
const BINARY: &str = "redis-server";

/// How long a started server may take to answer `PING` (loading an append-only file
/// included); a loaded 2-core machine starts one in well under a second.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Whether the server keeps its data across a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// `appendonly yes`, `appendfsync always`: every acknowledged write survives a kill.
    AppendOnly,
    /// Neither AOF nor RDB (`save ""`): a restart starts empty, like the machine's own Redis.
    Nothing,
}

/// A `redis-server` process of the test's own on `127.0.0.1:<free port>`, with a temporary
/// directory of its own. Killed, and its directory removed, on drop.
///
/// ```no_run
/// use test_support::redis_server::{Durability, PrivateRedis};
/// let Some(mut redis) = PrivateRedis::start(Durability::AppendOnly) else { return };
/// println!("{}", redis.url());
/// redis.kill();
/// redis.restart();
/// ```
#[derive(Debug)]
pub struct PrivateRedis {
    port: u16,
    dir: PathBuf,
    durability: Durability,
    /// Started with `cluster-enabled yes` (see [`start_cluster_of_one`](Self::start_cluster_of_one)),
    /// its cluster bus on this port. Chosen free like `port`: by default Redis puts the bus at
    /// `port + 10000`, which can land in the kernel's ephemeral range and be taken by any
    /// outgoing connection ("exited at its start").
    cluster: Option<u16>,
    child: Option<Child>,
}

impl PrivateRedis {
    /// Starts a server and waits until it answers `PING`; `None` (after the skip-unless-CI
    /// rule) when `redis-server` is not installed.
    pub fn start(durability: Durability) -> Option<PrivateRedis> {
        Self::start_as(durability, false)
    }

    /// A Redis Cluster of one node (`cluster-enabled yes`, every hash slot assigned to it,
    /// no persistence): it serves every key, and refuses a script or command over keys of
    /// different hash slots with `CROSSSLOT`, as any cluster does. `None` as for
    /// [`start`](Self::start).
    ///
    /// ```no_run
    /// use test_support::redis_server::PrivateRedis;
    /// let Some(cluster) = PrivateRedis::start_cluster_of_one() else { return };
    /// assert!(cluster.command("CLUSTER INFO").unwrap().contains("cluster_state:ok"));
    /// ```
    pub fn start_cluster_of_one() -> Option<PrivateRedis> {
        let redis = Self::start_as(Durability::Nothing, true)?;
        let reply = redis
            .command("CLUSTER ADDSLOTSRANGE 0 16383")
            .unwrap_or_else(|e| panic!("CLUSTER ADDSLOTSRANGE: {e}"));
        assert!(reply.starts_with("+OK"), "CLUSTER ADDSLOTSRANGE: {reply}");
        // The node marks the cluster `ok` once it has looked at its slots again (its cron,
        // a few ms to 100 ms later); there is nothing to wait on but the state itself.
        let deadline = Instant::now() + START_TIMEOUT;
        while !redis
            .command("CLUSTER INFO")
            .is_ok_and(|info| info.contains("cluster_state:ok"))
        {
            assert!(
                Instant::now() < deadline,
                "the private cluster on port {} did not reach cluster_state:ok within {START_TIMEOUT:?}",
                redis.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(redis)
    }

    fn start_as(durability: Durability, cluster: bool) -> Option<PrivateRedis> {
        if !crate::skip::command_available(BINARY) {
            return None;
        }
        let port = crate::process::free_port();
        let dir = std::env::temp_dir().join(format!(
            "private-redis-{}-{port}-{}",
            std::process::id(),
            crate::table::unique_table("d")
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut redis = PrivateRedis {
            port,
            dir,
            durability,
            cluster: cluster.then(crate::process::free_port),
            child: None,
        };
        redis.spawn();
        Some(redis)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's directory (its append-only files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's process id; `None` while it is killed.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `SIGSTOP`: the server hangs (the kernel still accepts connections into its listen
    /// queue, nothing answers) until [`thaw`](Self::thaw).
    ///
    /// ```no_run
    /// use test_support::redis_server::{Durability, PrivateRedis};
    /// let Some(redis) = PrivateRedis::start(Durability::AppendOnly) else { return };
    /// redis.freeze();
    /// redis.thaw();
    /// assert!(redis.command("PING").unwrap().starts_with("+PONG"));
    /// ```
    pub fn freeze(&self) {
        let pid = self
            .pid()
            .expect("freeze: the private redis-server is not running");
        assert!(crate::process::signal(pid, "STOP"), "kill -STOP {pid}");
    }

    /// `SIGCONT` after [`freeze`](Self::freeze).
    pub fn thaw(&self) {
        let pid = self
            .pid()
            .expect("thaw: the private redis-server is not running");
        assert!(crate::process::signal(pid, "CONT"), "kill -CONT {pid}");
    }

    /// `SIGKILL`: the server dies without saving anything, as in a crash (a frozen server
    /// too: `SIGKILL` ends a stopped process).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory (killing it first if it runs)
    /// and waits until it answers `PING`, its append-only file loaded.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Sends one command (inline form) and returns the raw reply, e.g. `+PONG\r\n`.
    pub fn command(&self, command: &str) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.write_all(format!("{command}\r\n").as_bytes())?;
        let mut reply = [0u8; 4096];
        let n = stream.read(&mut reply)?;
        Ok(String::from_utf8_lossy(&reply[..n]).into_owned())
    }

    fn spawn(&mut self) {
        let mut command = Command::new(BINARY);
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--save", "", "--daemonize", "no", "--logfile", ""])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match self.durability {
            Durability::AppendOnly => {
                command.args(["--appendonly", "yes", "--appendfsync", "always"])
            }
            Durability::Nothing => command.args(["--appendonly", "no"]),
        };
        if let Some(bus) = self.cluster {
            command
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &bus.to_string(),
                ])
                .args(["--cluster-config-file", "nodes.conf"]);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("start {BINARY}: {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        // `-LOADING` while the append-only file is read; refused before the port is bound.
        while !self
            .command("PING")
            .is_ok_and(|reply| reply.starts_with("+PONG"))
        {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "the private redis-server on port {} exited at its start ({status}): is \
                     the port taken?",
                    self.port
                );
            }
            assert!(
                Instant::now() < deadline,
                "the private redis-server on port {} did not answer PING within {START_TIMEOUT:?}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
