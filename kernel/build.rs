//! Picks the linker script for the target architecture and adds defmt's.

fn main() {
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap();
    println!("cargo:rerun-if-changed=build.rs");
    if os != "none" {
        // Host builds (e.g. `cargo clippy` without --target) get no linker script.
        return;
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let script = format!("{dir}/src/arch/{arch}/kernel.ld");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rustc-link-arg-bins=-T{script}");
    println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
    println!("cargo:rerun-if-env-changed=DEFMT_LOG");
}
