//! Passes the firmware's linker script to the bare-metal build.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap();
    if os != "none" {
        // Host builds (e.g. `cargo clippy` without --target) get no linker script.
        return;
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let script = format!("{dir}/src/firmware.ld");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rustc-link-arg-bins=-T{script}");
}
