//! Jobs added and removed while the scheduler runs (one job per tenant, read from a database).

use super::{Job, JobStatus, Scheduler, startup};
use lock_core::LockError;

impl Scheduler {
    /// Adds `job` to the running scheduler: its timer loop starts now (its initial delay
    /// counted from now) and [`jobs`](Self::jobs) lists it after the others.
    ///
    /// Checked as [`start`](crate::SchedulerBuilder::start) checks its jobs, against the jobs
    /// running now: fails, adding nothing, when another job has the same name or the same lock
    /// name, when the job's lock configuration or trigger is out of limits, when its parameters
    /// need state the builder did not register, or when the scheduler has shut down.
    ///
    /// Every instance adds the same jobs (from the same data), as every instance starts with
    /// the same jobs: the lock makes one instance run each fire.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::{Job, Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .jobs([])
    ///     .start()
    ///     .await?;
    /// for tenant in ["acme", "globex"] {
    ///     let job = Job::new(format!("invoice:{tenant}"), Trigger::cron("0 0 2 * * *")?, move || async move {
    ///         println!("invoicing {tenant}");
    ///     });
    ///     scheduler.add_job(job).await?;
    /// }
    /// let again = Job::new("invoice:acme", Trigger::cron("0 0 2 * * *")?, || async {});
    /// assert!(scheduler.add_job(again).await.is_err()); // "two jobs are named `invoice:acme`"
    /// let names = || scheduler.jobs().into_iter().map(|job| job.name).collect::<Vec<_>>();
    /// // History is on by default: its housekeeping job runs beside the added ones.
    /// assert_eq!(names(), [lock_scheduler::HOUSEKEEPING_JOB, "invoice:acme", "invoice:globex"]);
    /// scheduler.remove_job("invoice:globex").await?;
    /// assert_eq!(names(), [lock_scheduler::HOUSEKEEPING_JOB, "invoice:acme"]);
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub async fn add_job(&self, job: Job) -> Result<(), LockError> {
        let inner = &self.inner;
        if inner.stop.is_cancelled() {
            return Err(LockError::InvalidConfiguration(format!(
                "Scheduler::add_job(`{}`): the scheduler has shut down",
                job.name()
            )));
        }
        // The job's own checks (limits, lock configuration, state); the checks against the
        // other jobs follow under the table's lock, so two concurrent adds cannot both pass.
        let mut prepared = startup::prepare(vec![job], &inner.executor, &inner.values)?;
        let Some((job, config)) = prepared.pop() else {
            unreachable!("prepare returns one entry per job")
        };
        super::shards::require_registry([&*job], inner.ops.is_some())?;
        // Read before the table's lock (the provider is asked): a job added concurrently
        // under a colliding name is the one case this misses.
        let mut names: Vec<String> = inner
            .jobs
            .lock()
            .iter()
            .map(|e| e.lock_name().to_owned())
            .collect();
        names.push(config.name().to_owned());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        if let Some((a, b)) = inner
            .executor
            .provider()
            .names_sharing_a_row(&names)
            .await?
            .first()
        {
            return Err(LockError::InvalidConfiguration(format!(
                "Scheduler::add_job(`{}`): the lock names `{a}` and `{b}` are one name in {} \
                 (its name column ignores case or trailing spaces): they would share one lock \
                 and its last fire; make the column compare bytes or choose another lock name",
                job.name(),
                inner.executor.provider().describe()
            )));
        }
        let mut entries = inner.jobs.lock();
        let mut running: Vec<_> = entries
            .iter()
            .map(|e| (&*e.runner.job, &e.runner.config))
            .collect();
        running.push((&job, &config));
        super::shards::check_shard_rows(&running)?;
        drop(running);
        if let Some(running) = entries.iter().find(|e| e.name() == job.name()) {
            let first = running.runner.job.origin();
            return Err(super::startup::duplicate_name(
                job.name(),
                &first,
                &job.origin(),
            ));
        }
        if let Some(other) = entries.iter().find(|e| e.lock_name() == config.name()) {
            return Err(LockError::InvalidConfiguration(format!(
                "jobs `{}` and `{}` are both locked under `{}`: they would share the lock's \
                 last fire, so one job's fires would be refused as already run whenever the \
                 other ran a later slot; give one of them another lock name",
                other.name(),
                job.name(),
                config.name()
            )));
        }
        if job.trigger().parents().next().is_some() {
            let mut jobs: Vec<&Job> = entries.iter().map(|e| &*e.runner.job).collect();
            jobs.push(&*job);
            super::dependents::check(&jobs, inner.ops.is_some())
                .map_err(|e| LockError::InvalidConfiguration(format!("Scheduler::add_job: {e}")))?;
            if let Some(ops) = &inner.ops {
                let needs = super::dependents::needs(&job, |parent| {
                    entries
                        .iter()
                        .find(|e| e.name() == parent)
                        .map(|e| e.runner.job.distribution())
                });
                ops.dependents.register(&job, needs);
                if let Some(due) = ops.dependents.take_receiver() {
                    tokio::spawn(super::dependencies::start_due(
                        self.inner.clone(),
                        ops.clone(),
                        due,
                    ));
                }
            }
        }
        tracing::info!(job = job.name(), lock = config.name(), "job added");
        let entry = inner.spawn_job(job, config, tokio::time::Instant::now());
        entries.push(entry);
        Ok(())
    }

    /// Removes the job named `name`: it fires no more, and [`jobs`](Self::jobs) no longer
    /// lists it. Returns its last status once it has stopped.
    ///
    /// A body of the job running now is **not cancelled**: it finishes under its lease (as a
    /// body does at shutdown within the timeout), and this waits for it. To bound the wait,
    /// wrap the call in `tokio::time::timeout`; the body keeps running after the timeout and
    /// releases its lease when it ends. A body that should stop early watches
    /// [`JobContext::cancelled`](lock_core::JobContext::cancelled), which resolves at shutdown.
    ///
    /// Fails when no job has that name. The lock's row stays in the table (its `last_fire`
    /// keeps a job added again under the same lock from rerunning a slot that already ran).
    pub async fn remove_job(&self, name: &str) -> Result<JobStatus, LockError> {
        if let Some(ops) = &self.inner.ops {
            ops.dependents.unregister(name);
            if ops.dependents.has_children(name) {
                tracing::warn!(
                    job = name,
                    "job removed while other jobs run after it: they do not run until a job of \
                     this name is added again"
                );
            }
        }
        let entry = self.inner.jobs.remove(name).ok_or_else(|| {
            LockError::InvalidConfiguration(format!("Scheduler::remove_job: no job named `{name}`"))
        })?;
        entry.stop.cancel();
        // Out of the shared jobs' fingerprint: the next beat says this instance no longer
        // runs it (`sharing.rs`).
        if let (Some(share), Some(sharing)) = (
            entry.runner.share,
            self.inner.ops.as_ref().and_then(|ops| ops.sharing.as_ref()),
        ) {
            sharing.toggle(share.entry);
        }
        // The loop checks `stop` only while it sleeps, so a running fire completes first. The
        // loop catches the body's panics: a join error means it was aborted, which ends it too.
        let _ = entry.task.await;
        tracing::info!(job = name, "job removed");
        Ok(entry.state.status())
    }
}
