//! Makes the apps' linker script findable: apps link with `-Ttessera-app.ld` (passed by xtask),
//! and the linker looks for it in the search path added here. Cargo reruns this script when
//! the linker script changes, which rebuilds libtessera and relinks every app.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=tessera-app.ld");
    println!("cargo:rustc-link-search=native={dir}");
}
