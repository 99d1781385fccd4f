"""Key and delay distributions: goodness of fit of what is drawn to what is promised.

The fits are one-sample Kolmogorov-Smirnov tests (delays) and Pearson chi-square tests
(key ranks) at alpha = 0.001 with fixed seeds, so they are deterministic; each comes
with a power check proving the same test rejects a wrong parameter.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.errors import SpecError
from workloads.generator import delays, keys, spec
from workloads.generator.delays import DelaySpec
from workloads.generator.keys import KeyChooser, KeySpec

N = 20_000
KS_CRITICAL = 1.95 / math.sqrt(N)   # Kolmogorov's asymptotic critical value at alpha = 0.001
Z_999 = 3.090232                    # the standard normal's 0.999 quantile


def ks_statistic(sample: np.ndarray, cdf) -> float:
    """sup |F_n(x) - F(x)| of `sample` against the continuous CDF `cdf`."""
    x = np.sort(sample)
    n = len(x)
    f = cdf(x)
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))


def chi2_critical(df: int, z: float = Z_999) -> float:
    """The chi-square quantile with `df` degrees of freedom at normal quantile z (Wilson-Hilferty)."""
    c = 2 / (9 * df)
    return df * (1 - c + z * math.sqrt(c)) ** 3


def merge_sparse(observed: np.ndarray, expected: np.ndarray, least: float = 5.0):
    """Adjacent bins merged left to right until each expects at least `least` counts."""
    obs, exp = [], []
    o_acc = e_acc = 0.0
    for o, e in zip(observed, expected, strict=True):
        o_acc, e_acc = o_acc + o, e_acc + e
        if e_acc >= least:
            obs.append(o_acc)
            exp.append(e_acc)
            o_acc = e_acc = 0.0
    if e_acc > 0 or o_acc > 0:   # a thin tail joins the last full bin
        obs[-1] += o_acc
        exp[-1] += e_acc
    return np.array(obs), np.array(exp)


def chi_square(ranks: np.ndarray, probabilities: np.ndarray) -> tuple[float, float]:
    """(statistic, critical value at alpha = 0.001) of rank counts against `probabilities`."""
    observed = np.bincount(ranks, minlength=len(probabilities))
    obs, exp = merge_sparse(observed, probabilities * len(ranks))
    stat = float(np.sum((obs - exp) ** 2 / exp))
    return stat, chi2_critical(len(obs) - 1)


DELAYS = {
    "uniform": DelaySpec(distribution="uniform", max_ms=2000),
    "exponential": DelaySpec(distribution="exponential", mean_ms=500.0),
    "lognormal": DelaySpec(distribution="lognormal", median_ms=200.0, sigma=1.2),
    "pareto": DelaySpec(distribution="pareto", scale_ms=100.0, alpha=1.5),
}


class TestStatisticHelpers:
    def test_wilson_hilferty_matches_tabulated_chi_square_quantiles(self):
        """The approximate 0.999 quantiles are within 2% of the tables for df 5, 10, 50, 100."""
        table = {5: 20.515, 10: 29.588, 50: 86.661, 100: 149.449}
        for df, exact in table.items():
            approx = chi2_critical(df)
            assert abs(approx - exact) / exact < 0.02, f"df={df}: {approx:.3f} vs table {exact}"

    def test_sparse_bins_are_merged_until_each_expects_five(self):
        """Merging keeps the totals and leaves no bin expecting fewer than 5."""
        expected = np.array([50.0, 3.0, 1.0, 2.0, 0.5, 0.2])
        observed = np.array([48, 4, 0, 3, 1, 0])
        obs, exp = merge_sparse(observed, expected)
        assert exp.sum() == pytest.approx(expected.sum()) and obs.sum() == observed.sum()
        assert exp.min() >= 5, f"bins {exp.tolist()}"


class TestDelayCdf:
    def test_closed_forms_at_known_points(self):
        """Each CDF gives its textbook value at a landmark: max/2, the mean, the median, the scale."""
        cases = [
            (DELAYS["uniform"], 1000, 0.5),
            (DELAYS["exponential"], 500, 1 - math.exp(-1)),
            (DELAYS["lognormal"], 200, 0.5),
            (DELAYS["pareto"], 100, 1 - 2 ** -1.5),
        ]
        for d, x, want in cases:
            got = float(delays.cdf(d, np.array([x]))[0])
            assert got == pytest.approx(want, abs=1e-9), f"{d.distribution} at {x}: {got} vs {want}"

    def test_cdfs_run_from_zero_to_one(self):
        """Every CDF is 0 at 0 and approaches 1 far out, and never decreases."""
        x = np.linspace(0, 1e7, 10_001)
        for name, d in DELAYS.items():
            f = delays.cdf(d, x)
            assert f[0] == pytest.approx(0, abs=1e-12), f"{name}: F(0) = {f[0]}"
            assert f[-1] > 0.999, f"{name}: F(1e7) = {f[-1]}"
            assert np.all(np.diff(f) >= 0), f"{name}: CDF decreases"

    def test_distributions_without_closed_form_refuse(self):
        """"none" and "groups" have no delay CDF: asking for one is an error, not zeros."""
        for name in ("none", "groups"):
            with pytest.raises(ValueError, match=name):
                delays.cdf(DelaySpec(distribution=name), np.array([1.0]))


class TestDelayDraw:
    @pytest.mark.parametrize("name", sorted(DELAYS))
    def test_draws_fit_the_distribution(self, name):
        """A Kolmogorov-Smirnov test of 20,000 draws against delays.cdf accepts at alpha = 0.001."""
        d = DELAYS[name]
        sample = delays.draw(d, np.random.default_rng(11), N)
        stat = ks_statistic(sample, lambda x: delays.cdf(d, x))
        assert stat < KS_CRITICAL, f"{name}: KS D = {stat:.4f} >= critical {KS_CRITICAL:.4f} (n={N})"

    @pytest.mark.parametrize(("name", "wrong"), [
        ("exponential", {"mean_ms": 1000.0}),
        ("uniform", {"max_ms": 2200}),
        ("lognormal", {"sigma": 1.35}),
        ("pareto", {"alpha": 1.3}),
    ])
    def test_the_same_test_rejects_a_wrong_parameter(self, name, wrong):
        """The KS check has power: draws compared with a CDF of a changed parameter are rejected."""
        d = DELAYS[name]
        other = DelaySpec(**{**d.__dict__, **wrong})
        sample = delays.draw(d, np.random.default_rng(11), N)
        stat = ks_statistic(sample, lambda x: delays.cdf(other, x))
        assert stat > KS_CRITICAL, f"{name} vs {wrong}: KS D = {stat:.4f} <= critical {KS_CRITICAL:.4f}"

    def test_none_and_groups_draw_no_delay(self):
        """Without a delay distribution every delay is exactly 0."""
        for name in ("none", "groups"):
            sample = delays.draw(DelaySpec(distribution=name, group_size=4), np.random.default_rng(1), 100)
            assert not sample.any(), f"{name}: nonzero delays {sample[sample != 0][:5]}"

    def test_delays_are_never_negative(self):
        """No distribution draws an event from the future."""
        for name, d in DELAYS.items():
            sample = delays.draw(d, np.random.default_rng(3), N)
            assert sample.min() >= 0, f"{name}: min delay {sample.min()}"


class TestLateMask:
    @pytest.mark.parametrize("share", [0.01, 0.1, 0.5])
    def test_the_late_share_is_binomial(self, share):
        """The fraction marked late lies within 4 binomial standard deviations of late_share."""
        mask = delays.late_mask(DelaySpec(late_share=share), np.random.default_rng(5), N)
        bound = 4 * math.sqrt(share * (1 - share) / N)
        assert abs(mask.mean() - share) < bound, f"late {mask.mean():.4f} vs {share} (4 sigma = {bound:.4f})"

    def test_no_share_marks_nothing(self):
        """late_share = 0 marks no event late."""
        mask = delays.late_mask(DelaySpec(), np.random.default_rng(5), N)
        assert not mask.any(), f"{int(mask.sum())} marked late"


class TestShuffleGroups:
    def test_each_group_is_a_permutation_of_itself(self):
        """Values move only within their run of group_size, and every group keeps its values."""
        values = np.arange(1000, dtype=float)
        out = delays.shuffle_groups(values, 10, np.random.default_rng(2))
        groups = out.reshape(-1, 10)
        assert np.array_equal(np.sort(groups, axis=1), values.reshape(-1, 10))
        moved = int(np.sum(out != values))
        assert moved > 500, f"only {moved} of 1000 values moved"

    def test_groups_are_shuffled_independently(self):
        """Not every group gets the same permutation."""
        out = delays.shuffle_groups(np.arange(1000, dtype=float), 10, np.random.default_rng(2))
        patterns = {tuple(row) for row in out.reshape(-1, 10) - np.arange(0, 1000, 10)[:, None]}
        assert len(patterns) > 90, f"only {len(patterns)} distinct permutations in 100 groups"

    def test_group_size_one_is_the_identity(self):
        """A group of one cannot be out of order."""
        values = np.arange(50, dtype=float)
        assert np.array_equal(delays.shuffle_groups(values, 1, np.random.default_rng(2)), values)


class TestKeyProbabilities:
    def test_zipf_weights_follow_the_power_law(self):
        """P(rank 1) / P(rank k) = k ** s, and the weights sum to 1."""
        w = keys.zipf_weights(50, 1.3)
        assert w.sum() == pytest.approx(1.0)
        for k in (2, 10, 50):
            assert w[0] / w[k - 1] == pytest.approx(k ** 1.3), f"rank {k}: ratio {w[0] / w[k - 1]}"

    def test_hot_share_goes_to_the_hot_keys_uniformly(self):
        """Each of the hot_keys gains hot_share / hot_keys; the rest is the base scaled by 1 - share."""
        s = KeySpec(distribution="uniform", count=10, hot_share=0.4, hot_keys=2)
        p = keys.probabilities(s)
        assert p.sum() == pytest.approx(1.0)
        assert p[:2] == pytest.approx([0.6 / 10 + 0.2] * 2), f"hot ranks {p[:2]}"
        assert p[2:] == pytest.approx([0.6 / 10] * 8), f"cold ranks {p[2:]}"

    def test_key_names_sort_by_rank(self):
        """Names are zero-padded to one width, so string order is rank order."""
        names = list(KeyChooser(KeySpec(count=120)).names)
        assert names[0] == "k000" and names[-1] == "k119", f"{names[0]}..{names[-1]}"
        assert sorted(names) == names


KEYS = {
    "zipf": KeySpec(distribution="zipf", count=200, zipf_s=1.1),
    "uniform": KeySpec(distribution="uniform", count=200),
    "zipf+hot": KeySpec(distribution="zipf", count=200, zipf_s=1.3, hot_share=0.3, hot_keys=3),
}


class TestKeyChooser:
    @pytest.mark.parametrize("name", sorted(KEYS))
    def test_rank_counts_fit_the_probabilities(self, name):
        """A chi-square test of 20,000 ranks against keys.probabilities accepts at alpha = 0.001."""
        s = KEYS[name]
        ranks = KeyChooser(s).draw(np.random.default_rng(13), N)
        stat, critical = chi_square(ranks, keys.probabilities(s))
        assert stat < critical, f"{name}: chi2 = {stat:.1f} >= critical {critical:.1f}"

    def test_the_same_test_rejects_a_wrong_exponent(self):
        """The chi-square check has power: ranks drawn with s = 1.3 do not fit Zipf(1.1)."""
        ranks = KeyChooser(KeySpec(count=200, zipf_s=1.3)).draw(np.random.default_rng(13), N)
        stat, critical = chi_square(ranks, keys.probabilities(KeySpec(count=200, zipf_s=1.1)))
        assert stat > critical, f"chi2 = {stat:.1f} <= critical {critical:.1f}"

    def test_ranks_stay_in_range(self):
        """Draws are ranks 0..count-1, including with every event on the hot keys."""
        for s in (KeySpec(count=7), KeySpec(distribution="uniform", count=7, hot_share=1.0, hot_keys=2)):
            ranks = KeyChooser(s).draw(np.random.default_rng(1), N)
            assert 0 <= ranks.min() and ranks.max() < s.count, f"ranks {ranks.min()}..{ranks.max()}"
        hot_only = KeyChooser(KeySpec(distribution="uniform", count=7, hot_share=1.0, hot_keys=2))
        assert set(np.unique(hot_only.draw(np.random.default_rng(1), N))) == {0, 1}


def _workload(**tables) -> dict:
    return {"duration": "1s", "rate": {"eps": 100}, **tables}


class TestParseErrors:
    @pytest.mark.parametrize(("tables", "path"), [
        ({"delay": {"distribution": "exponential", "mean": "-1s"}}, "workload.delay.mean"),
        ({"delay": {"distribution": "exponential", "mean": 500}}, "workload.delay.mean"),
        ({"delay": {"late_share": 1.5}}, "workload.delay.late_share"),
        ({"keys": {"zipf_s": 0}}, "workload.keys.zipf_s"),
    ])
    def test_a_bad_value_names_its_dotted_path(self, tables, path):
        """A bad distribution parameter raises SpecError naming the key's full path."""
        with pytest.raises(SpecError, match=path.replace(".", r"\.")):
            spec.parse(_workload(**tables))

    def test_good_values_become_the_spec(self):
        """Durations are read into milliseconds on the delay spec."""
        w = spec.parse(_workload(delay={"distribution": "lognormal", "median": "1.5s", "sigma": 0.5}))
        assert (w.delay.median_ms, w.delay.sigma) == (1500, 0.5), f"{w.delay}"
