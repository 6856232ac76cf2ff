// An `Err` is logged with `{:?}`: the error type must implement Debug.
use lock_scheduler::scheduled;

struct Opaque;

#[scheduled(fixed_rate = "1m", name = "fails")]
async fn fails() -> Result<(), Opaque> {
    Err(Opaque)
}

impl From<lock_core::LockError> for Opaque {
    fn from(_: lock_core::LockError) -> Self {
        Opaque
    }
}

fn main() {}
