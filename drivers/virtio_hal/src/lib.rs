//! What a virtio driver domain (`virtio-blk`, `virtio-net`) gives the `virtio-drivers` crate
//! to drive the device the kernel granted it: the crate's [`Hal`](virtio_drivers::Hal) over
//! DMA stretches from `dma_alloc`, with per-request translation of frames clients lend
//! ([`dma`]), and the transport over the device's mapped
//! registers: MMIO on RISC-V `virt` ([`mmio`]), PCI with its MSI-X table kept by the kernel on
//! q35 ([`pci`]).
//!
//! A domain records its device with [`dma::set_device`], makes its page pool with
//! [`dma::init_pool`], then makes the transport of the slot's kind ([`mmio::transport`] for a device-tree
//! node, [`pci::transport`] for a PCI function).
//!
//! The only `unsafe` of the virtio driver domains besides their buffers: implementing the
//! `Hal` trait and reading the mapped registers and configuration space.

#![no_std]

pub mod dma;
pub mod mmio;
pub mod pci;
