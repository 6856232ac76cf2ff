//! Shared-out jobs ([`SchedulerBuilder::share_jobs`](crate::SchedulerBuilder::share_jobs)): each
//! slot of a job is asked for by one instance, its owner, instead of by every instance, so the
//! database decides one row per execution however many instances run.
//!
//! Decisions, and why:
//! - **The owner is chosen by rendezvous hashing, not leased.** Every instance scores each live
//!   instance of its group for a job (a hash of the job's lock name and the instance's id) and
//!   the highest score owns the job. No partition table, no claims, no rebalancing protocol:
//!   the registry's heartbeats (which every instance already reads for sharded jobs) are the
//!   membership, and an instance coming or going moves only the jobs it owns or takes, about
//!   one in N. The lock row still decides each slot: two instances that both think they own a
//!   job only cost a second row decision, never a second run.
//! - **A group is the live instances that run the same shareable jobs with the same triggers.**
//!   Each instance adds a fingerprint of that set to the version it registers
//!   (`0.1.0+share.<hex>`): an owner is only ever picked among instances that have the job.
//!   During a rolling deploy that adds, removes or reschedules a job, the old and the new
//!   versions form two groups and each asks for its jobs (two askers, as without sharing), and
//!   an instance with sharing off asks for every job itself.
//! - **Which jobs are shared**: cron and fixed-rate jobs with one run per slot (not sharded,
//!   broadcast, fixed-delay or dependent ones), `overlap = "skip"`, and under no run limit (a
//!   busy instance must leave the slot to the others, which an owner alone cannot). Manual,
//!   dependent and catch-up-at-start fires are never held back.
//! - **Overlap, not gaps, when the view changes.** Before its first view of the registry an
//!   instance asks for every job; an instance that does not find itself among its group's live
//!   instances (its set changed since its last beat, or its beats fail) asks for every job.
//!   A newcomer takes its jobs at its first view, while the previous owners ask until their
//!   next one: both ask for a second at most.
//! - **A job another instance owns costs nothing per slot.** Its loop waits for a change of
//!   the view (a `watch` told by [`Sharing::see`] only when the group changed), not for the
//!   next slot: 4 instances x 10,000 jobs due every second otherwise woke 30,000 loops a
//!   second for nothing, all at the whole second where the owners' fires start. Its status
//!   has no next fire meanwhile; its registry row gets the trigger's next slot.
//! - **A job handed on catches up what its previous owner left.** When a loop becomes its
//!   job's owner it first reads the lock row and runs the slots missed since its `last_fire`
//!   per the job's misfire policy, `skip` counting as `fire_once` (the latest missed slot, at
//!   most one period old): those slots were not missed by the cluster, only by the hand-over.
//!   At a graceful stop the instance beats once with its fingerprint removed, so the others
//!   take its jobs at their next beat (at most one interval; the slot due meanwhile is caught
//!   up). A crashed owner's jobs are taken when it counts as gone: within
//!   `GONE_AFTER_HEARTBEATS + 1` heartbeat intervals (6 s at the default 1 s); the latest
//!   slot missed in that window is caught up, older ones follow the misfire policy.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use lock_trigger::{Firing, Overlap};
use tokio::sync::watch;

use super::Job;

/// The marker before the fingerprint in the registered version.
const TAG: &str = "+share.";

/// A 64-bit FNV-1a hash: the same on every instance and build (unlike `std`'s hashers).
pub(super) fn hash64(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// SplitMix64's finalizer: spreads a job's and an instance's hashes combined into a score in
/// which every bit depends on both (FNV alone keeps too much of the input's structure for
/// rendezvous scores of names like `job-17`).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A job's key for ownership: the hash of its lock name.
pub(super) fn job_key(lock_name: &str) -> u64 {
    hash64(lock_name)
}

/// What a job adds to its instance's fingerprint: its lock name and its trigger, so that
/// instances that would fire it at different slots are in different groups.
pub(super) fn set_entry(lock_name: &str, trigger_text: &str) -> u64 {
    mix(hash64(lock_name) ^ hash64(trigger_text).rotate_left(17))
}

/// Whether `job` is shared out (see the module's decisions): slotted, one run per slot
/// (`single`), `overlap = "skip"`, and under no run limit (`unlimited`).
pub(super) fn shareable(job: &Job, single: bool, unlimited: bool) -> bool {
    single
        && unlimited
        && job.overlap() == Overlap::Skip
        && matches!(job.trigger().spec().kind.firing(), Firing::Slotted { .. })
}

/// A shared job's keys, kept by its runner.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shared {
    /// Its key for ownership ([`job_key`]).
    pub(super) key: u64,
    /// What it adds to the fingerprint ([`set_entry`]), taken out again when it is removed.
    pub(super) entry: u64,
}

impl Shared {
    pub(super) fn of(lock_name: &str, trigger_text: &str) -> Self {
        Shared {
            key: job_key(lock_name),
            entry: set_entry(lock_name, trigger_text),
        }
    }
}

/// This instance's part in sharing out the jobs: its fingerprint and its view of its group.
pub(super) struct Sharing {
    /// The hash of this instance's id: its seed in every job's scores.
    seed: u64,
    /// The XOR of the shareable jobs' [`set_entry`]: the same on every instance that runs the
    /// same set, whatever the order the jobs were added in.
    set: AtomicU64,
    /// At a graceful stop: the beats carry no fingerprint, so the others take the jobs.
    leaving: AtomicBool,
    /// The seeds of the group's live instances, as of the last view of the registry; None
    /// until the first, or while this instance is not among them (it then asks for every job).
    group: RwLock<Option<Arc<[u64]>>>,
    /// Told when `group` changes: the loops of jobs another instance owns wait for it instead
    /// of waking at every slot (7,500 of 10,000 loops on each of 4 instances).
    changed: watch::Sender<()>,
}

impl Sharing {
    pub(super) fn new(instance_id: &str) -> Self {
        Sharing {
            seed: hash64(instance_id),
            set: AtomicU64::new(0),
            leaving: AtomicBool::new(false),
            group: RwLock::new(None),
            changed: watch::Sender::new(()),
        }
    }

    /// A receiver told of the next change of the view; subscribe, then read
    /// [`owns`](Self::owns), then wait: a change in between is not lost.
    pub(super) fn changes(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    /// A shareable job joins (or, with the same entry, leaves) the fingerprint.
    pub(super) fn toggle(&self, entry: u64) {
        self.set.fetch_xor(entry, Ordering::Relaxed);
    }

    /// From now on the beats say this instance takes no jobs (a graceful stop).
    pub(super) fn leave(&self) {
        self.leaving.store(true, Ordering::Relaxed);
    }

    /// The version to register: `base` with this instance's fingerprint, or `base` alone once
    /// it is leaving.
    pub(super) fn version(&self, base: &str) -> String {
        if self.leaving.load(Ordering::Relaxed) {
            return base.to_owned();
        }
        format!("{base}{TAG}{:016x}", self.set.load(Ordering::Relaxed))
    }

    /// Takes the registry's live instances (id and registered version) as the view: the group
    /// is those whose version is this instance's own, as registered by `registered` (the
    /// version its last beat wrote).
    pub(super) fn see<'a>(&self, registered: &str, live: impl Iterator<Item = (&'a str, &'a str)>) {
        let mut seeds: Vec<u64> = live
            .filter(|(_, version)| *version == registered && registered.contains(TAG))
            .map(|(id, _)| hash64(id))
            .collect();
        seeds.sort_unstable();
        seeds.dedup();
        let view = seeds
            .binary_search(&self.seed)
            .is_ok()
            .then(|| seeds.into());
        let mut group = self.group.write().unwrap_or_else(|p| p.into_inner());
        if *group != view {
            *group = view;
            drop(group);
            self.changed.send_replace(());
        }
    }

    /// Whether this instance asks for the slots of the job with key `job`: it owns it in its
    /// view of its group, or it has no view.
    pub(super) fn owns(&self, job: u64) -> bool {
        let group = self.group.read().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(group) = group else {
            return true;
        };
        owner(&group, job) == Some(self.seed)
    }
}

/// The seed of `job`'s owner among `group`: the highest score (ties, which need a 64-bit
/// collision, go to the lowest seed, the same on every instance).
fn owner(group: &[u64], job: u64) -> Option<u64> {
    group
        .iter()
        .copied()
        .max_by_key(|seed| (mix(job ^ seed), std::cmp::Reverse(*seed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sharing(id: &str, ids: &[&str]) -> Sharing {
        let sharing = Sharing::new(id);
        sharing.toggle(set_entry("job", "every 1s"));
        let version = sharing.version("0.1.0");
        sharing.see(&version, ids.iter().map(|id| (*id, version.as_str())));
        sharing
    }

    #[test]
    fn every_job_has_exactly_one_owner_in_a_shared_view() {
        let ids = ["a", "b", "c", "d"];
        let views: Vec<Sharing> = ids.iter().map(|id| sharing(id, &ids)).collect();
        let mut owned = [0usize; 4];
        for n in 0..4000 {
            let key = job_key(&format!("job-{n}"));
            let owners: Vec<usize> = (0..4).filter(|i| views[*i].owns(key)).collect();
            assert_eq!(owners.len(), 1, "job-{n}: {owners:?}");
            owned[owners[0]] += 1;
        }
        // Rendezvous hashing spreads evenly: 1,000 each, within a few standard deviations.
        for count in owned {
            assert!((850..1150).contains(&count), "{owned:?}");
        }
    }

    #[test]
    fn an_instance_leaving_moves_only_its_own_jobs() {
        let before: Vec<Sharing> = ["a", "b", "c"]
            .iter()
            .map(|id| sharing(id, &["a", "b", "c"]))
            .collect();
        let after: Vec<Sharing> = ["a", "b"]
            .iter()
            .map(|id| sharing(id, &["a", "b"]))
            .collect();
        for n in 0..1000 {
            let key = job_key(&format!("job-{n}"));
            for i in 0..2 {
                if before[i].owns(key) {
                    assert!(after[i].owns(key), "job-{n} moved away from a survivor");
                }
            }
        }
    }

    #[test]
    fn no_view_or_not_in_the_view_asks_for_everything() {
        let alone = Sharing::new("a");
        assert!(alone.owns(job_key("x")));
        // Its own row not (yet) among the live ones with its version.
        let outside = sharing("z", &["a", "b"]);
        for n in 0..100 {
            assert!(outside.owns(job_key(&format!("job-{n}"))));
        }
    }

    #[test]
    fn another_job_set_is_another_group() {
        let a = Sharing::new("a");
        a.toggle(set_entry("job", "every 1s"));
        let b = Sharing::new("b");
        b.toggle(set_entry("job", "every 2s"));
        let (va, vb) = (a.version("0.1.0"), b.version("0.1.0"));
        assert_ne!(va, vb);
        a.see(&va, [("a", va.as_str()), ("b", vb.as_str())].into_iter());
        b.see(&vb, [("a", va.as_str()), ("b", vb.as_str())].into_iter());
        // Each alone in its group: both ask.
        assert!(a.owns(job_key("job")) && b.owns(job_key("job")));
    }

    #[test]
    fn the_fingerprint_ignores_the_order_jobs_were_added_in_and_drops_removed_ones() {
        let (x, y) = (set_entry("x", "every 1s"), set_entry("y", "every 1s"));
        let a = Sharing::new("a");
        a.toggle(x);
        a.toggle(y);
        let b = Sharing::new("b");
        b.toggle(y);
        b.toggle(x);
        assert_eq!(a.version("v"), b.version("v"));
        b.toggle(y);
        assert_ne!(a.version("v"), b.version("v"));
        a.leave();
        assert_eq!(a.version("v"), "v");
    }
}
