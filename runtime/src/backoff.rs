//! Exponential backoff with jitter and reset, as client-go's reflector uses it.
//!
//! Invariants: the base delay starts at `initial`, doubles (times `factor`) on each call up
//! to `max`, and returns to `initial` when more than `reset_after` passed since the
//! previous call; each returned delay is the base plus a uniform jitter in
//! `[0, jitter × base)`.

use std::time::Duration;

use tokio::time::Instant;

/// Parameters of a [`Backoff`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// First delay.
    pub initial: Duration,
    /// Largest base delay.
    pub max: Duration,
    /// Growth factor per step.
    pub factor: f64,
    /// Jitter as a fraction of the base delay.
    pub jitter: f64,
    /// A quiet period after which the delay starts over from `initial`.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    /// client-go's reflector values: 800 ms → 30 s, factor 2, jitter 1.0, reset after 2 min.
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Backoff state; see the module documentation.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    base: Duration,
    last: Option<Instant>,
}

impl Backoff {
    /// A fresh backoff.
    pub fn new(config: BackoffConfig) -> Self {
        Backoff { config, base: config.initial, last: None }
    }

    /// The delay to wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        self.base = match self.last {
            Some(last) if now.duration_since(last) <= self.config.reset_after => {
                self.base.mul_f64(self.config.factor).min(self.config.max)
            }
            _ => self.config.initial,
        };
        self.last = Some(now);
        let jitter = self.base.mul_f64(self.config.jitter * fastrand::f64());
        self.base + jitter
    }

    /// The current base delay (without jitter).
    pub fn base(&self) -> Duration {
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn grows_caps_and_resets() {
        let mut b = Backoff::new(BackoffConfig::default());
        let d = b.next_delay();
        assert!(d >= Duration::from_millis(800) && d < Duration::from_millis(1600), "{d:?}");
        let mut bases = vec![b.base()];
        for _ in 0..8 {
            b.next_delay();
            bases.push(b.base());
        }
        assert_eq!(bases[1], Duration::from_millis(1600));
        assert_eq!(bases[2], Duration::from_millis(3200));
        assert_eq!(*bases.last().unwrap(), Duration::from_secs(30));
        tokio::time::advance(Duration::from_secs(121)).await;
        b.next_delay();
        assert_eq!(b.base(), Duration::from_millis(800));
    }
}
