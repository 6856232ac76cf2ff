// An `Err` is logged and kept in the run history by its message chain (`{:#}`), never by
// `{:?}`: the error type must implement Display, Debug alone is not enough.
use lock_scheduler::scheduled;

#[derive(Debug)]
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
