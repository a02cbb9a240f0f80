//! Tunables of the reliable-datagram core: the [`Config`] a connection runs with, its
//! validation, and the registered parameters it is built from.
//!
//! This module owns the defaults and the limits between them (a window that 16-bit sequence
//! numbers can address, a send queue that can hold the largest message...). It must never
//! read the environment itself: values come resolved through [`Params`].

use std::fmt;
use std::time::Duration;

use kestrel_transport::params::{Param, ParamKind, ParamSpec, Params};

use super::wire::{HEADER_LEN, MAX_PAYLOAD};

/// Largest window: sequence numbers are compared by signed 16-bit difference, so every
/// segment alive at either end must lie within half the sequence space.
pub const MAX_WINDOW: u16 = 32767;

/// How one connection behaves. Both ends of a connection must use the same `window` (it is
/// a job-wide parameter); the other values are local.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Segments the sender may have unacknowledged, and the span of sequence numbers the
    /// receiver buffers ahead of the next one it needs.
    pub window: u16,
    /// Largest datagram this side sends, header included (the path MTU minus IP and UDP
    /// headers: 1472 for the `udp` provider on a 1500-byte MTU).
    pub max_datagram: usize,
    /// Retransmission timeout before any round trip has been measured.
    pub rto_initial: Duration,
    /// Lower bound of the measured retransmission timeout.
    pub rto_min: Duration,
    /// Upper bound of the retransmission timeout after backoff.
    pub rto_max: Duration,
    /// How long an acknowledgement may wait for data to ride on.
    pub ack_delay: Duration,
    /// In-order segments after which an acknowledgement goes out at once.
    pub ack_every: u16,
    /// Segments sent after a missing one, acknowledged before it, that declare it lost.
    pub reorder_threshold: u16,
    /// Time without acknowledgement progress, while data is outstanding, after which the
    /// connection is failed (it reports [`crate::Event::PathFailed`]).
    pub fail_after: Duration,
    /// The same limit for a connection that is its peer's sole working path (see
    /// [`crate::Connection::set_sole_path`]): with nowhere to move its traffic, a stall must not
    /// end the job as early. Never shorter than `fail_after` in effect.
    pub peer_timeout: Duration,
    /// Bytes of messages accepted by `send` and not yet fully acknowledged.
    pub max_send_queue_bytes: usize,
    /// Bytes of complete messages waiting for `poll_deliver` before the receiver stops
    /// advancing (and stops acknowledging) until the application catches up.
    pub max_recv_queue_bytes: usize,
    /// Largest message; also the largest reassembly buffer a peer can make this side allocate.
    pub max_message: usize,
    /// Whether the sender's loss detection uses the selective part of standalone ACKs (the
    /// 64-segment bitmap and the newest-segment echo, always sent). Without it, recovery rests
    /// on cumulative ACKs: `reorder_threshold` duplicate ACKs and the timer.
    pub selective_ack: bool,
    /// How the sender limits what it puts into the network beyond `window`.
    pub congestion_control: CcAlgorithm,
    /// Congestion window of a new connection, in segments (at most `window` is used).
    pub initial_window: u16,
    /// Congestion window after a retransmission timeout, in segments.
    pub loss_window: u16,
    /// Segments estimated waiting in a queue from which a loss counts as congestion (0: every
    /// loss does, as in plain Reno).
    pub queue_threshold: u16,
    /// Lower bound of the tail-loss probe timeout (`2 * srtt + ack_delay`).
    pub tail_probe_min: Duration,
    /// Tail-loss probes sent without acknowledgement progress before the retransmission
    /// timer is left to act (0: none).
    pub tail_probes: u8,
}

/// The congestion control a sender runs (see [`super::congestion`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcAlgorithm {
    /// NewReno with selective-ACK loss recovery: slow start, additive increase, halving on
    /// loss, collapse on timeout, undo of spurious timeouts.
    Reno,
    /// None: the flow window is the only limit (a lossless fabric, or measuring without it).
    Off,
}

impl CcAlgorithm {
    /// The value of `usnic_cc` naming this algorithm.
    pub fn name(self) -> &'static str {
        match self {
            CcAlgorithm::Reno => "reno",
            CcAlgorithm::Off => "off",
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            window: 4096,
            max_datagram: 1472,
            rto_initial: Duration::from_millis(5),
            rto_min: Duration::from_millis(5),
            rto_max: Duration::from_millis(250),
            ack_delay: Duration::from_micros(100),
            ack_every: 16,
            reorder_threshold: 3,
            fail_after: Duration::from_secs(3),
            peer_timeout: Duration::from_secs(10),
            max_send_queue_bytes: 16 << 20,
            max_recv_queue_bytes: 16 << 20,
            max_message: (4 << 20) + (64 << 10),
            selective_ack: true,
            congestion_control: CcAlgorithm::Reno,
            initial_window: 32,
            loss_window: 2,
            queue_threshold: 16,
            tail_probe_min: Duration::from_micros(500),
            tail_probes: 2,
        }
    }
}

/// A configuration that cannot work, with the parameter to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "usnic reliable-datagram core: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Payload bytes per segment.
    pub fn max_payload(&self) -> usize {
        self.max_datagram.saturating_sub(HEADER_LEN)
    }

    /// Checks the limits between the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |s: String| Err(ConfigError(s));
        if self.window == 0 || self.window > MAX_WINDOW {
            return err(format!(
                "window of {} segments is outside 1..={MAX_WINDOW} (16-bit sequence numbers are compared by signed difference); set {} accordingly",
                self.window,
                WINDOW.spec().env_var()
            ));
        }
        if self.max_datagram <= HEADER_LEN || self.max_datagram > HEADER_LEN + MAX_PAYLOAD {
            return err(format!(
                "max_datagram of {} bytes must exceed the {HEADER_LEN}-byte header and stay within {} bytes; check the MTU the fabric reported",
                self.max_datagram,
                HEADER_LEN + MAX_PAYLOAD
            ));
        }
        if self.rto_min.is_zero() || self.rto_min > self.rto_max {
            return err(format!(
                "retransmission timeout bounds min {:?} / max {:?} are inverted or zero; set {} below {}",
                self.rto_min,
                self.rto_max,
                RTO_MIN_US.spec().env_var(),
                RTO_MAX_US.spec().env_var()
            ));
        }
        if self.rto_initial < self.rto_min || self.rto_initial > self.rto_max {
            return err(format!(
                "initial retransmission timeout {:?} lies outside [{:?}, {:?}]; set {} between them",
                self.rto_initial,
                self.rto_min,
                self.rto_max,
                RTO_INITIAL_US.spec().env_var()
            ));
        }
        if self.ack_every == 0 || self.reorder_threshold == 0 {
            return err(format!(
                "ack_every ({}) and reorder_threshold ({}) must be at least 1; set {} / {}",
                self.ack_every,
                self.reorder_threshold,
                ACK_EVERY.spec().env_var(),
                REORDER_THRESHOLD.spec().env_var()
            ));
        }
        if self.initial_window == 0 || self.loss_window == 0 {
            return err(format!(
                "congestion windows must be at least one segment (initial {}, after a timeout {}); set {} / {}",
                self.initial_window,
                self.loss_window,
                CC_INITIAL_WINDOW.spec().env_var(),
                CC_LOSS_WINDOW.spec().env_var()
            ));
        }
        if self.fail_after <= self.rto_max {
            return err(format!(
                "fail_after {:?} must exceed the largest retransmission timeout {:?}, or a connection fails before it has retried; raise {}",
                self.fail_after,
                self.rto_max,
                FAIL_AFTER_MS.spec().env_var()
            ));
        }
        if self.max_message > u32::MAX as usize || self.max_message > self.max_send_queue_bytes {
            return err(format!(
                "max_message of {} bytes must fit the send queue ({} bytes) and 32 bits; raise {} or lower {}",
                self.max_message,
                self.max_send_queue_bytes,
                SEND_QUEUE.spec().env_var(),
                MAX_MESSAGE.spec().env_var()
            ));
        }
        Ok(())
    }

    /// The configuration from resolved parameters, for datagrams of at most `max_datagram`
    /// bytes (which the fabric decides from the provider and the path MTU).
    pub fn from_params(params: &Params, max_datagram: usize) -> Result<Config, ConfigError> {
        let us = |p: &'static Param<i64>| Duration::from_micros(p.get(params).max(0) as u64);
        let cfg = Config {
            window: WINDOW.get(params).clamp(1, i64::from(MAX_WINDOW)) as u16,
            max_datagram,
            rto_initial: us(&RTO_INITIAL_US),
            rto_min: us(&RTO_MIN_US),
            rto_max: us(&RTO_MAX_US),
            ack_delay: us(&ACK_DELAY_US),
            ack_every: ACK_EVERY.get(params).clamp(1, i64::from(u16::MAX)) as u16,
            reorder_threshold: REORDER_THRESHOLD.get(params).clamp(1, i64::from(u16::MAX)) as u16,
            fail_after: Duration::from_millis(FAIL_AFTER_MS.get(params).max(0) as u64),
            peer_timeout: Duration::from_millis(PEER_TIMEOUT_MS.get(params).max(0) as u64),
            max_send_queue_bytes: SEND_QUEUE.get(params) as usize,
            max_recv_queue_bytes: RECV_QUEUE.get(params) as usize,
            max_message: MAX_MESSAGE.get(params) as usize,
            selective_ack: SELECTIVE_ACK.get(params),
            congestion_control: match CC.get(params).as_str() {
                "off" => CcAlgorithm::Off,
                _ => CcAlgorithm::Reno,
            },
            initial_window: CC_INITIAL_WINDOW
                .get(params)
                .clamp(1, i64::from(MAX_WINDOW)) as u16,
            loss_window: CC_LOSS_WINDOW.get(params).clamp(1, i64::from(MAX_WINDOW)) as u16,
            queue_threshold: CC_QUEUE_THRESHOLD.get(params).clamp(0, i64::from(u16::MAX)) as u16,
            tail_probe_min: us(&TAIL_PROBE_MIN_US),
            tail_probes: TAIL_PROBES.get(params).clamp(0, i64::from(u8::MAX)) as u8,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// `KESTREL_USNIC_WINDOW`.
pub static WINDOW: Param<i64> = Param::new(ParamSpec {
    name: "usnic_window",
    component: "usnic",
    kind: ParamKind::Int {
        min: 16,
        max: MAX_WINDOW as i64,
    },
    default: "4096",
    description: "Segments in flight per peer and rail (sender window = receiver reorder buffer); the same on every rank.",
});

/// `KESTREL_USNIC_RTO_INITIAL_US`.
pub static RTO_INITIAL_US: Param<i64> = Param::new(ParamSpec {
    name: "usnic_rto_initial_us",
    component: "usnic",
    kind: ParamKind::Int {
        min: 100,
        max: 10_000_000,
    },
    default: "5000",
    description: "Retransmission timeout in microseconds before the first round trip is measured.",
});

/// `KESTREL_USNIC_RTO_MIN_US`.
pub static RTO_MIN_US: Param<i64> = Param::new(ParamSpec {
    name: "usnic_rto_min_us",
    component: "usnic",
    kind: ParamKind::Int {
        min: 100,
        max: 10_000_000,
    },
    default: "5000",
    description: "Lower bound in microseconds of the measured retransmission timeout (above this machine's multi-millisecond scheduling stalls; tail-loss probes repair single losses sooner).",
});

/// `KESTREL_USNIC_RTO_MAX_US`.
pub static RTO_MAX_US: Param<i64> = Param::new(ParamSpec {
    name: "usnic_rto_max_us",
    component: "usnic",
    kind: ParamKind::Int {
        min: 1000,
        max: 60_000_000,
    },
    default: "250000",
    description:
        "Upper bound in microseconds of the retransmission timeout after exponential backoff.",
});

/// `KESTREL_USNIC_ACK_DELAY_US`.
pub static ACK_DELAY_US: Param<i64> = Param::new(ParamSpec {
    name: "usnic_ack_delay_us",
    component: "usnic",
    kind: ParamKind::Int {
        min: 0,
        max: 100_000,
    },
    default: "100",
    description: "Microseconds an acknowledgement waits for outgoing data to ride on before it goes out alone.",
});

/// `KESTREL_USNIC_ACK_EVERY`.
pub static ACK_EVERY: Param<i64> = Param::new(ParamSpec {
    name: "usnic_ack_every",
    component: "usnic",
    kind: ParamKind::Int { min: 1, max: 4096 },
    default: "16",
    description:
        "In-order segments received after which an acknowledgement goes out without waiting.",
});

/// `KESTREL_USNIC_REORDER_THRESHOLD`.
pub static REORDER_THRESHOLD: Param<i64> = Param::new(ParamSpec {
    name: "usnic_reorder_threshold",
    component: "usnic",
    kind: ParamKind::Int { min: 1, max: 1024 },
    default: "3",
    description: "Later segments acknowledged ahead of a missing one before it is retransmitted without waiting for the timer.",
});

/// `KESTREL_USNIC_FAIL_AFTER_MS`.
pub static FAIL_AFTER_MS: Param<i64> = Param::new(ParamSpec {
    name: "usnic_fail_after_ms",
    component: "usnic",
    kind: ParamKind::Int {
        min: 10,
        max: 3_600_000,
    },
    default: "3000",
    description: "Milliseconds without acknowledgement progress, with data outstanding, before a rail to a peer is declared dead.",
});

/// `KESTREL_USNIC_PEER_TIMEOUT_MS`: silence after which the last path to a peer is dead.
pub static PEER_TIMEOUT_MS: Param<i64> = Param::new(ParamSpec {
    name: "usnic_peer_timeout_ms",
    component: "usnic",
    kind: ParamKind::Int { min: 10, max: 3_600_000 },
    default: "10000",
    description: "Milliseconds without any acknowledgement on the last working path to a peer before the job stops (other paths fail after usnic_fail_after_ms).",
});

/// `KESTREL_USNIC_SEND_QUEUE`.
pub static SEND_QUEUE: Param<u64> = Param::new(ParamSpec {
    name: "usnic_send_queue",
    component: "usnic",
    kind: ParamKind::Size {
        min: 64 << 10,
        max: 1 << 34,
    },
    default: "16M",
    description:
        "Bytes of unacknowledged messages per peer and rail before sends report would-block.",
});

/// `KESTREL_USNIC_RECV_QUEUE`.
pub static RECV_QUEUE: Param<u64> = Param::new(ParamSpec {
    name: "usnic_recv_queue",
    component: "usnic",
    kind: ParamKind::Size {
        min: 64 << 10,
        max: 1 << 34,
    },
    default: "16M",
    description: "Bytes of received messages waiting for the application per peer and rail before the receiver stops acknowledging.",
});

/// `KESTREL_USNIC_MAX_MESSAGE`.
pub static MAX_MESSAGE: Param<u64> = Param::new(ParamSpec {
    name: "usnic_max_message",
    component: "usnic",
    kind: ParamKind::Size {
        min: 1 << 10,
        max: 1 << 31,
    },
    default: "4160K",
    description: "Largest message the reliability layer carries (and reassembles for a peer); larger ones are split above it.",
});

/// `KESTREL_USNIC_SELECTIVE_ACK`.
pub static SELECTIVE_ACK: Param<bool> = Param::new(ParamSpec {
    name: "usnic_selective_ack",
    component: "usnic",
    kind: ParamKind::Bool,
    default: "true",
    description: "Use the selective part of ACKs (64-segment bitmap, newest-segment echo) to retransmit only what was lost.",
});

/// `KESTREL_USNIC_CC`.
pub static CC: Param<String> = Param::new(ParamSpec {
    name: "usnic_cc",
    component: "usnic",
    kind: ParamKind::Choice(&["reno", "off"]),
    default: "reno",
    description: "Congestion control per peer and rail: reno (slow start, additive increase, halving on loss, collapse on timeout) or off (only usnic_window limits what is in flight; for lossless fabrics).",
});

/// `KESTREL_USNIC_CC_INITIAL_WINDOW`.
pub static CC_INITIAL_WINDOW: Param<i64> = Param::new(ParamSpec {
    name: "usnic_cc_initial_window",
    component: "usnic",
    kind: ParamKind::Int {
        min: 1,
        max: MAX_WINDOW as i64,
    },
    default: "32",
    description: "Congestion window of a new connection in segments (slow start grows it from there); at most usnic_window is used.",
});

/// `KESTREL_USNIC_CC_LOSS_WINDOW`.
pub static CC_LOSS_WINDOW: Param<i64> = Param::new(ParamSpec {
    name: "usnic_cc_loss_window",
    component: "usnic",
    kind: ParamKind::Int { min: 1, max: 1024 },
    default: "2",
    description: "Congestion window in segments after a retransmission timeout, from which slow start restarts (restored if the timeout proves spurious).",
});

/// `KESTREL_USNIC_CC_QUEUE_THRESHOLD`.
pub static CC_QUEUE_THRESHOLD: Param<i64> = Param::new(ParamSpec {
    name: "usnic_cc_queue_threshold",
    component: "usnic",
    kind: ParamKind::Int {
        min: 0,
        max: MAX_WINDOW as i64,
    },
    default: "16",
    description: "Segments estimated waiting in a queue (window x (round trip - smallest round trip) / round trip) from which a loss is taken as congestion and halves the window; fewer means random loss and the window is kept. 0: every loss halves it (plain Reno).",
});

/// `KESTREL_USNIC_TAIL_PROBE_MIN_US`.
pub static TAIL_PROBE_MIN_US: Param<i64> = Param::new(ParamSpec {
    name: "usnic_tail_probe_min_us",
    component: "usnic",
    kind: ParamKind::Int {
        min: 100,
        max: 10_000_000,
    },
    default: "500",
    description: "Lower bound in microseconds of the tail-loss probe timeout (2 x smoothed round trip + usnic_ack_delay_us): with data outstanding and no acknowledgement for that long, one segment is resent, without touching the congestion window, before the retransmission timeout declares everything lost.",
});

/// `KESTREL_USNIC_TAIL_PROBES`.
pub static TAIL_PROBES: Param<i64> = Param::new(ParamSpec {
    name: "usnic_tail_probes",
    component: "usnic",
    kind: ParamKind::Int { min: 0, max: 16 },
    default: "2",
    description: "Tail-loss probes (each doubling the probe timeout) sent without acknowledgement progress before the retransmission timer acts; 0 disables them.",
});

/// The parameters of the reliable-datagram core.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![
        WINDOW.spec(),
        RTO_INITIAL_US.spec(),
        RTO_MIN_US.spec(),
        RTO_MAX_US.spec(),
        ACK_DELAY_US.spec(),
        ACK_EVERY.spec(),
        REORDER_THRESHOLD.spec(),
        FAIL_AFTER_MS.spec(),
        PEER_TIMEOUT_MS.spec(),
        SEND_QUEUE.spec(),
        RECV_QUEUE.spec(),
        MAX_MESSAGE.spec(),
        SELECTIVE_ACK.spec(),
        CC.spec(),
        CC_INITIAL_WINDOW.spec(),
        CC_LOSS_WINDOW.spec(),
        CC_QUEUE_THRESHOLD.spec(),
        TAIL_PROBE_MIN_US.spec(),
        TAIL_PROBES.spec(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_well_formed_and_defaults_match_config_default() {
        kestrel_transport::params::check_specs(&specs()).unwrap();
        let params = Params::defaults(&specs());
        let cfg = Config::from_params(&params, 1472).unwrap();
        assert_eq!(cfg, Config::default());
    }

    #[test]
    fn invalid_configs_name_the_parameter() {
        let bad = Config {
            window: 40000,
            ..Config::default()
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("KESTREL_USNIC_WINDOW"), "{e}");
        let bad = Config {
            max_datagram: HEADER_LEN,
            ..Config::default()
        };
        assert!(bad.validate().is_err());
        let bad = Config {
            max_message: 32 << 20,
            ..Config::default()
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("KESTREL_USNIC_SEND_QUEUE"), "{e}");
        let bad = Config {
            fail_after: Duration::from_millis(100),
            ..Config::default()
        };
        assert!(bad.validate().is_err());
    }
}
