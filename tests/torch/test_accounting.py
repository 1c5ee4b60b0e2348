"""numtk.torch._accounting, the Renyi-DP bookkeeping shared by privcode and pisa.

Oracles: Opacus's get_privacy_spent (the same improved conversion) on random RDP curves, the Gaussian
mechanism's closed form, the binomial sum written term by term with math.comb, and Opacus's compute_rdp.
"""

import math
import warnings

import numpy as np
import pytest

from numtk.torch import _accounting as acc


def test_grids():
    np.testing.assert_array_equal(acc.DEFAULT_ORDERS, np.arange(2, 257))
    assert acc.OPACUS_ORDERS.size == 151 and acc.OPACUS_ORDERS[0] == pytest.approx(1.1)
    assert acc.OPACUS_ORDERS[98] == pytest.approx(10.9) and acc.OPACUS_ORDERS[-1] == 63
    assert not acc.DEFAULT_ORDERS.flags.writeable and not acc.OPACUS_ORDERS.flags.writeable


def test_rdp_to_epsilon_equals_opacus_conversion():
    pytest.importorskip("opacus")
    from opacus.accountants.analysis.rdp import get_privacy_spent

    rng = np.random.default_rng(0)
    for orders in (acc.DEFAULT_ORDERS, acc.OPACUS_ORDERS):
        for _ in range(20):
            rdp = np.cumsum(rng.uniform(0.0, 0.2, orders.size))
            delta = 10.0 ** rng.uniform(-9, -3)
            eps, order = acc.rdp_to_epsilon(rdp, orders, delta)
            with warnings.catch_warnings():  # Opacus warns when the best order is at the grid's edge
                warnings.simplefilter("ignore")
                want, want_order = get_privacy_spent(orders=list(orders), rdp=rdp, delta=delta)
            assert eps == pytest.approx(want, rel=1e-12, abs=1e-12) and order == want_order


def test_rdp_to_epsilon_edges():
    orders = np.array([2.0, 4.0, 8.0])
    eps, order = acc.rdp_to_epsilon(np.array([np.nan, np.inf, 1.0]), orders, 1e-5)
    assert order == 8.0 and eps == pytest.approx(1.0 - (math.log(1e-5) + math.log(8)) / 7 + math.log(7 / 8))
    assert acc.rdp_to_epsilon(np.array([np.inf, np.nan, np.inf]), orders, 1e-5)[0] == math.inf
    assert acc.rdp_to_epsilon(np.zeros(3), orders, 0.9)[0] == 0.0   # a negative minimum is reported as 0


def test_gaussian_rdp_closed_form():
    np.testing.assert_allclose(acc.gaussian_rdp([2.0, 10.0], 2.0, 4.0), [2.0 * 4 / 32, 10.0 * 4 / 32])


def test_sampled_gaussian_integer_orders_by_hand():
    q, sigma = 0.07, 0.9
    for a in (2, 3, 7, 20):
        A = sum(math.comb(a, k) * (1 - q) ** (a - k) * q ** k * math.exp((k * k - k) / (2 * sigma ** 2))
                for k in range(a + 1))
        assert acc.sampled_gaussian_rdp(q, sigma, [a])[0] == pytest.approx(math.log(A) / (a - 1), rel=1e-12)
    np.testing.assert_allclose(acc.sampled_gaussian_rdp(1.0, sigma, [2.0, 2.5]), acc.gaussian_rdp([2.0, 2.5], 1.0,
                                                                                                  sigma))
    assert (acc.sampled_gaussian_rdp(0.0, sigma, [2.0, 2.5]) == 0).all()
    assert np.isinf(acc.sampled_gaussian_rdp(0.1, 0.0, [2.0])).all()
    out = acc.sampled_gaussian_rdp(q, sigma, [2.0, 2.5])
    assert not out.flags.writeable


def test_sampled_gaussian_fractional_orders_equal_opacus():
    pytest.importorskip("opacus")
    from opacus.accountants.analysis.rdp import compute_rdp

    orders = np.array([1.05, 1.5, 2.25, 3.7, 9.9, 31.5])
    for q, sigma in ((0.01, 1.0), (0.001, 0.6), (0.1, 2.0), (0.3, 1.5)):
        np.testing.assert_allclose(acc.sampled_gaussian_rdp(q, sigma, orders),
                                   compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=list(orders)),
                                   rtol=1e-6)
