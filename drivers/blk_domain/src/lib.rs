//! `blk_domain`: the half of a block driver domain that only a domain has, whatever its
//! device.
//!
//! A block driver domain (`drivers/virtio_blk`, `drivers/ahci`) brings its device up, wraps it
//! in the block-device trait ([`blk_interface::device::BlockDevice`]) and hands it to
//! [`serve::run`]: the self-test if asked ([`self_test::check`]), then [`serve::serve`], which
//! finds the client domains the manifest connects to it, gives each a data area of the
//! driver's DMA memory (`tessera::dma`), builds the server and runs the serving loop of
//! `blk_server` over the domain's channels and kernel.
//!
//! Why this is not in `blk_server`: everything here makes system calls or reads the control
//! block (channels by name, DMA memory and rights, the interrupt's endpoint, `block`), so it
//! runs only in a domain; the self-test waits on the device's interrupt. The serving loop,
//! the server and the stage are portable and tested on the host there.
//!
//! Invariants: no `unsafe` here (the device's registers and DMA buffers are each driver's own
//! business); the loop never waits for a client, only for an endpoint to change.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod self_test;
pub mod serve;
