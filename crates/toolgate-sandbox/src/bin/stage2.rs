//! Stage 2 as a standalone binary, for embedders and tests; the `toolgate`
//! binary offers the same as a hidden subcommand.

fn main() {
    std::process::exit(toolgate_sandbox::stage2::main_with_args(
        std::env::args_os().skip(1),
    ));
}
