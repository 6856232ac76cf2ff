// The default name is the function's path, known only after module_path!() expands, so it is
// checked in a constant of the expansion.
mod a_module_with_a_rather_long_name {
    pub mod and_a_nested_one_that_is_long_too {
        #[lock_core::scheduler_lock]
        pub async fn export_everything() {}
    }
}

fn main() {}
