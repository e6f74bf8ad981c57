//! The candle engine: the networks' forward passes as candle tensor programs
//! ([`forward`]), the channels-last convolution and pooling custom ops they use ([`ops`]),
//! and double backward for second derivatives ([`autodiff`]). It runs every network, on any
//! device candle supports, and is the reference the fused engine is tested against.

pub(crate) mod autodiff;
mod client;
pub(crate) mod forward;
pub(crate) mod ops;

pub(crate) use client::Candle;
