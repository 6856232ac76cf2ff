use lock_scheduler::scheduled;

#[scheduled(fixed_rate = "2s", misfire = "fire_one", name = "near_miss")]
async fn near_miss() {}

#[scheduled(cron = "0 * * * * *", misfire = "always", name = "unknown_policy")]
async fn unknown_policy() {}

#[scheduled(cron = "0 * * * * *", misfire = fire_once, name = "not_a_string")]
async fn not_a_string() {}

#[scheduled(fixed_rate = "2s", misfire = "catch_up", misfire_max = 0, name = "max_zero")]
async fn max_zero() {}

#[scheduled(fixed_rate = "2s", misfire = "catch_up", misfire_max = 5000, name = "max_too_big")]
async fn max_too_big() {}

#[scheduled(fixed_rate = "2s", misfire = "catch_up", misfire_max = "10", name = "max_string")]
async fn max_string() {}

#[scheduled(fixed_rate = "2s", misfire = "catch_up", misfire_max = 10u32, name = "max_suffix")]
async fn max_suffix() {}

#[scheduled(fixed_rate = "2s", misfire = "fire_once", misfire_grace = "0s", name = "grace_zero")]
async fn grace_zero() {}

#[scheduled(fixed_rate = "2s", misfire = "fire_once", misfire_grace = "an hour", name = "grace_bad")]
async fn grace_bad() {}

fn main() {}
