//! The remote paging protocol (RPP) of Heracles (thesis §10.1): pages kept in other nodes'
//! memory, read, written and exchanged whole over UDP.
//!
//! (Full description in progress.)

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod client;
pub mod rtt;
pub mod server;
pub mod wire;

pub use client::{Outcome, Params, StreamKey, Transfer, Transfers};
pub use rtt::{RttConfig, RttEstimator};
pub use server::{PageServer, PageStore, StoreError};
pub use wire::{
    Code, Data, DataFlags, DecodeError, EncodeError, Header, Message, Packet, decode, encode,
};
