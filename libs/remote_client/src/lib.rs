//! Tessera's remote paging client (Heracles §10.4, the thesis's `RPPCInt`).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;
