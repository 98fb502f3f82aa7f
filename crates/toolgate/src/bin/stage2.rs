//! Stage 2 alone: what toolgate runs inside each sandbox when this binary
//! lies beside it and is of the same build (it starts in less than half the
//! time of the whole toolgate binary), and what embedders of
//! toolgate-sandbox can name as their stage 2. As root it also stands in,
//! outside the sandbox, for the init of the command's pid namespace
//! (`__stand-in`), in place of a copy of the toolgate process.

fn main() {
    std::process::exit(toolgate_sandbox::stage2::main_with_args(
        std::env::args_os().skip(1),
    ));
}
