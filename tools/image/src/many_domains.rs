//! Manifests with many domains, written under `target/bench/`: `manifests/bench-switch.toml`'s
//! two domains that yield to each other, and up to [`MOST_OTHERS`] others beside them, asleep
//! ([`asleep`]) or spinning out of slice ([`spinning`]). `cargo xtask bench ipc` times the switch
//! in them; the QEMU suite boots the largest on both architectures.

use std::fmt::Write as _;

use anyhow::{Result, bail};

use tool_base::util;

/// The most other domains beside the two that switch: 1,024 domains in all.
pub const MOST_OTHERS: usize = manifest::MAX_DOMAINS - 2;

/// The two-domain switch manifest (`manifests/bench-switch.toml`) made ready for `others` more
/// domains; its text. Its system memory is raised to hold them (256 KiB each), and the two
/// that switch get a 1 ms / 2 s contract (with slack time, as the best-effort one), so that
/// the others' deadlines come first: each other domain starts (and blocks, or uses its slice)
/// right after the boot, before the switching domains start timing, and the switch is timed
/// without their start-up.
fn base_for(others: usize) -> Result<String> {
    let text = std::fs::read_to_string(util::root().join("manifests/bench-switch.toml"))?;
    let memory = "memory = \"64M\"";
    let guarantee = "memory = { guaranteed = \"256K\" }\n";
    if !text.contains(memory) || text.matches(guarantee).count() != 2 {
        bail!(
            "manifests/bench-switch.toml: expected `{memory}` in [system] and two domains, each with `{}`",
            guarantee.trim()
        );
    }
    let mib = memory_mib(others);
    Ok(text.replacen(memory, &format!("memory = \"{mib}M\""), 1).replace(
        guarantee,
        &format!("{guarantee}cpu = {{ period = \"2s\", slice = \"1ms\", extra = true }}\n"),
    ))
}

/// The two-domain switch manifest with `others` sleeping domains added, written under
/// `target/bench/`; its path. Each sleeps under a 50 µs / 100 ms contract, so that 1,022 of
/// them fit beside the two that switch.
pub fn asleep(others: usize) -> Result<std::path::PathBuf> {
    let mut text = base_for(others)?;
    add_sleepers(&mut text, others)?;
    written(&format!("switch-with-{others}-others.toml"), &text)
}

/// Adds `others` domains that sleep for 5 s under 50 µs / 100 ms contracts to the manifest
/// `text`.
fn add_sleepers(text: &mut String, others: usize) -> Result<()> {
    for i in 0..others {
        write!(
            text,
            "\n[[domain]]\nname = \"idle-{i}\"\napp = \"nullcall\"\nargs = [\"--idle\", \"5000\"]\n\
             memory = {{ guaranteed = \"256K\" }}\ncpu = {{ period = \"100ms\", slice = \"50us\" }}\n"
        )?;
    }
    Ok(())
}

/// A domain that makes 20,000 timed wake-ups (`nullcall --calls 20000 --sleep`) beside
/// `others` sleeping domains (as in [`asleep`]: each with an instant 5 s ahead in the kernel's
/// queue of timed instants), written under `target/bench/`; its path. The waker gets the
/// switching domains' 1 ms / 2 s contract, so that the sleepers start and block first.
pub fn waking(others: usize) -> Result<std::path::PathBuf> {
    let mib = memory_mib(others);
    let mut text = format!(
        "# A timed wake-up beside {others} sleeping domains (xtask many_domains::waking).\n\
         [system]\nmemory = \"{mib}M\"\n\n[[domain]]\nname = \"waker\"\napp = \"nullcall\"\n\
         args = [\"--calls\", \"20000\", \"--sleep\"]\nmemory = {{ guaranteed = \"256K\" }}\n\
         cpu = {{ period = \"2s\", slice = \"1ms\", extra = true }}\n"
    );
    add_sleepers(&mut text, others)?;
    written(&format!("wakeup-with-{others}-others.toml"), &text)
}

/// The two-domain switch manifest with `others` domains spinning out of slice added, written
/// under `target/bench/`; its path. Each spinner uses its 10 µs slice right after the boot,
/// before the switching domains start timing ([`base_for`]), and none runs again before the
/// measurement ends, 1 s later at the earliest.
pub fn spinning(others: usize) -> Result<std::path::PathBuf> {
    let mut text = base_for(others)?;
    for i in 0..others {
        write!(
            text,
            "\n[[domain]]\nname = \"spin-{i}\"\napp = \"spin\"\nargs = [\"--for\", \"1000\"]\n\
             memory = {{ guaranteed = \"256K\" }}\n\
             cpu = {{ period = \"1000ms\", slice = \"10us\", extra = false }}\n"
        )?;
    }
    written(&format!("switch-with-{others}-spinning.toml"), &text)
}

/// The system memory, in MiB, of a manifest with `others` domains of 256 KiB beside two: 64 MiB
/// holds 64 domains; beyond that, 1 MiB more for every 3 domains (their guarantees, the
/// kernel's frame tables and the images' pages).
fn memory_mib(others: usize) -> usize {
    64 + others.saturating_sub(62).div_ceil(3)
}

/// Writes the manifest `text` as `target/bench/NAME`; its path.
pub fn written(name: &str, text: &str) -> Result<std::path::PathBuf> {
    let dir = util::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}
