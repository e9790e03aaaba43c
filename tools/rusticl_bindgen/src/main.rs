// Minimal stand-in for bindgen-cli 0.71.1's main.rs (the CLI parsing lives in the bindgen crate's `__cli` feature).
use std::env;

fn main() {
    env_logger::init();
    match bindgen::builder_from_flags(env::args()) {
        Ok((builder, output, _verbose)) => {
            let bindings = builder.generate().expect("Unable to generate bindings");
            bindings.write(output).expect("Unable to write output");
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
}
