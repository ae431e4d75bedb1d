//! TCP endpoints as Linux implements them.
pub mod interval_set;
pub mod prr;
pub mod rack;
pub mod rate;
pub mod receive_window;
pub mod receiver;
pub mod rtt;
pub mod send_buffer;
pub mod sender;
