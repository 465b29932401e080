"""The power reading: budget-limited, no signal, conclusive."""
import numpy as np
import pytest

from audit.records.power import auc_interval, power


def test_auc_interval_covers_the_true_auc():
    """Binormal scores with shift 1: AUC = Φ(1/√2). Misses over 400 draws at 95 % (nominal 0.05):
    limit 31, P(fail | miss rate 0.1) = 0.925 (tests/size.py)."""
    from scipy.stats import norm

    from size import count_failures

    rng = np.random.default_rng(0)
    true = float(norm.cdf(1 / np.sqrt(2)))

    def missed(_):
        a, lo, hi = auc_interval(rng.normal(0, 1, 300), rng.normal(1, 1, 300), 0.95)
        return not lo <= true <= hi

    count_failures(missed, 400, 0.05, "the AUC interval missed the true AUC")


def test_readings():
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 1, 500), rng.normal(0, 1, 500)
    signal = rng.normal(0, 1, 500), rng.normal(2, 1, 500)
    p = power(verdict="CONSISTENT", claimed_epsilon=8, max_certifiable_eps=5.9, scores_out=signal[0],
              scores_in=signal[1])
    assert p.reading == "budget-limited" and "could not have found" in p.sentence
    p = power(verdict="CONSISTENT", claimed_epsilon=1, max_certifiable_eps=5.9, scores_out=noise[0],
              scores_in=noise[1])
    assert p.reading == "no signal" and p.auc_interval[0] <= 0.5 <= p.auc_interval[1]
    p = power(verdict="CONSISTENT", claimed_epsilon=1, max_certifiable_eps=5.9, scores_out=signal[0],
              scores_in=signal[1])
    assert p.reading == "conclusive"
    assert power(verdict="VIOLATION", claimed_epsilon=1, max_certifiable_eps=0.5, scores_out=noise[0],
                 scores_in=noise[1]).reading == "conclusive"


@pytest.mark.parametrize("auc_side", [0.0, 1.0])
def test_perfect_separation_keeps_a_positive_width(auc_side):
    out, inn = (np.zeros(50), np.ones(50)) if auc_side == 1.0 else (np.ones(50), np.zeros(50))
    a, lo, hi = auc_interval(out, inn)
    assert a == auc_side and hi > lo
