use lock_scheduler::scheduled;

// An `after` job has no clock of its own: every option of the clock triggers is refused.
#[scheduled(
    after = "import_orders",
    zone = "Europe/Berlin",
    initial_delay = "10s",
    misfire = "fire_once",
    misfire_grace = "1h",
    misfire_max = 3,
    name = "clocked_after"
)]
async fn clocked_after() {}

#[scheduled(after = "import_orders", shards = 4, name = "sharded_after")]
async fn sharded_after() {}

#[scheduled(after = "import_orders", broadcast = true, name = "broadcast_after")]
async fn broadcast_after() {}

fn main() {}
