//! `blk_domain`: what every block driver domain shares, whatever its device.
//!
//! A block driver domain (`drivers/virtio_blk`, `drivers/ahci`) brings its device up, wraps it
//! in the block-device trait ([`blk_interface::device::BlockDevice`]) and hands it to [`serve::run`]:
//! the self-test if asked ([`self_test::check`]), then [`serve::serve`], which serves the
//! client domains the manifest connects to it over the block protocol (`blk_interface`): one
//! loop taking the device's completions after its interrupt and the clients' requests from
//! their channels, blocking when nothing moves. The device's DMA memory comes from
//! `tessera::dma`.
//!
//! Invariants: no `unsafe` here (the device's registers and DMA buffers are each driver's own
//! business); the loop never waits for a client, only for an endpoint to change.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod self_test;
pub mod serve;
