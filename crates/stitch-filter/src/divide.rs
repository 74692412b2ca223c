//! Exact division by a divisor fixed when a filter is built, by multiplication.
//!
//! Every insert and lookup splits a fingerprint by the remainder range `R`, which is rarely a
//! power of two; a hardware 64-bit divide costs tens of cycles, more than the rest of a lookup's
//! arithmetic. This is the round-up method of Granlund and Montgomery, "Division by Invariant
//! Integers using Multiplication" (PLDI 1994, figure 4.1), exact for every 64-bit dividend.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Divider {
    divisor: u64,
    /// The low 64 bits of the 65-bit multiplier `2^64 + magic`.
    magic: u64,
    /// `min(l, 1)` and `max(l - 1, 0)` for `l = ceil(log2(divisor))`.
    shift1: u32,
    shift2: u32,
}

impl Divider {
    /// A divider for `divisor`, which must be at least 1.
    pub(crate) fn new(divisor: u64) -> Self {
        debug_assert!(divisor >= 1);
        let log = u64::BITS - (divisor - 1).leading_zeros(); // ceil(log2(divisor))
                                                             // floor(2^64 * (2^l - d) / d) + 1, below 2^64 because 2^l - d < d.
        let magic = (((1u128 << log) - u128::from(divisor)) << 64) / u128::from(divisor) + 1;
        Self {
            divisor,
            magic: magic as u64,
            shift1: log.min(1),
            shift2: log.saturating_sub(1),
        }
    }

    /// `(n / divisor, n % divisor)`.
    pub(crate) fn div_rem(&self, n: u64) -> (u64, u64) {
        let high = ((u128::from(self.magic) * u128::from(n)) >> 64) as u64;
        let quotient = (high + ((n - high) >> self.shift1)) >> self.shift2;
        (quotient, n - quotient * self.divisor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(divisor: u64, n: u64) {
        assert_eq!(
            Divider::new(divisor).div_rem(n),
            (n / divisor, n % divisor),
            "{n} / {divisor}"
        );
    }

    #[test]
    fn edge_cases_divide_exactly() {
        let divisors = [
            1,
            2,
            3,
            7,
            64,
            95,
            151,
            1 << 20,
            (1 << 20) + 1,
            (1 << 58) - 1,
            1 << 58,
        ];
        for divisor in divisors {
            for n in [
                0,
                1,
                divisor - 1,
                divisor,
                divisor + 1,
                u64::MAX - 1,
                u64::MAX,
            ] {
                check(divisor, n);
            }
        }
    }

    proptest! {
        #[test]
        fn divides_exactly(divisor in 1u64..=1 << 58, n in any::<u64>(), small in 1u64..5_000) {
            check(divisor, n);
            check(small, n);
        }
    }
}
