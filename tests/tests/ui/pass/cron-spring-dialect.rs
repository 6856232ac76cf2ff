// Spring's Quartz day forms, also inside lists, as users bring them from `@Scheduled`.
use lock_scheduler::scheduled;

#[scheduled(cron = "0 0 0 1W,15,LW * ?", name = "first_mid_last_weekday")]
async fn first_mid_last_weekday() {}

#[scheduled(cron = "0 0 * L-1 * *", name = "day_before_last")]
async fn day_before_last() {}

#[scheduled(cron = "0 0 0 ? * 7#3", name = "third_sunday_as_seven")]
async fn third_sunday_as_seven() {}

#[scheduled(cron = "0 0 0 ? * 0#3,FRIL", name = "third_sunday_or_last_friday")]
async fn third_sunday_or_last_friday() {}

fn main() {}
