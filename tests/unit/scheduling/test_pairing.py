"""Pairing prices: the cutting-stock LP's duals on hand-solved distributions (fgdb's use of them:
test_plugins_fgdb)."""

from __future__ import annotations

import numpy as np
import pytest

from suanli.scheduling.domain.fragmentation import TypicalTask
from suanli.scheduling.domain.pairing import device_demand, gap_prices, solve_prices
from suanli.scheduling.domain.plugins.fgdb import StrandingModel

# openb's shared sizes in small: 650s pair with 320s (30 left), 550s with a 230 and a 220 (0 left), spare
# 320s go three to a device, 810s stand alone. Scaled to one device's milli the 810s do not all fit, so the
# device is priced at 810: a 320 earns 270 (three fill a device), and a 230 at most 810 / 4 (four of them).
SIZES = {810: 0.3, 650: 0.3, 320: 0.6, 550: 0.3, 230: 0.3, 220: 0.3}
TYPICAL = tuple(TypicalTask(1000, milli, 1, (), weight) for milli, weight in SIZES.items())


def regret(was: int, milli: int) -> float:
    prices = gap_prices(TYPICAL)
    return float(prices.regret(np.array([was]), np.array([was - milli]), milli)[0])


def test_two_sizes_hand_solved() -> None:
    # 0.8 of each per device: pairs of 470 (940 a device) beat lone 810s, so 0.4 devices take 470 pairs and
    # 0.6 take 810s (not all of them: their bound is slack, so their price is 0 and their profit 810). The
    # device price is then 810 and a 470's profit 405 (two fill a device as well as an 810).
    prices = solve_prices({810: 0.8, 470: 0.8})  # items per device
    assert prices.profit == pytest.approx({810: 810.0, 470: 405.0})
    assert prices.gap_value[[1000, 530, 190]].tolist() == pytest.approx([810.0, 405.0, 0.0])
    # LP value = device price + scarce sizes' prices x their counts = 810 + 0.8 x 65 = 862, the primal
    # optimum 0.6 x 810 + 0.4 x 940.
    assert 810 + 0.8 * (470 - prices.profit[470]) == pytest.approx(0.6 * 810 + 0.4 * 940)


def test_regret_is_zero_on_a_best_filling_and_positive_off_it() -> None:
    assert gap_prices(TYPICAL).profit[320] == pytest.approx(270.0)
    # The 320 completes a 650's device (30 left): nothing better fits 350.
    assert regret(350, 320) == pytest.approx(0.0)
    # A 230 there leaves 120 that nothing fills: it forgoes a 320's 270 for its own <= 202.5.
    assert regret(350, 230) >= 270 - 810 / 4
    # On a fresh device it costs nothing: 550 + 230 + 220 fill one exactly.
    assert regret(1000, 230) == pytest.approx(0.0)


def test_device_demand_counts_devices_and_fills_one_device() -> None:
    tasks = (
        TypicalTask(4000, 500, 1, (), 0.5),
        TypicalTask(8000, 1000, 2, (), 0.25),  # two whole devices each
        TypicalTask(2000, 0, 0, (), 0.25),  # CPU-only: no device
    )
    demand = device_demand(tasks)
    # rates 0.5 of 500 and 0.5 of 1000 (750 milli), scaled to 1000 milli: 2/3 of each.
    assert demand == pytest.approx({500: 2 / 3, 1000: 2 / 3})
    assert sum(size * n for size, n in demand.items()) == pytest.approx(1000)
    assert device_demand((TypicalTask(2000, 0, 0, (), 1.0),)) == {}


def test_regret_is_never_negative_and_prices_are_cached() -> None:
    prices = gap_prices(TYPICAL)
    assert gap_prices(TYPICAL) is prices
    was = np.arange(1001)
    for milli in (220, 230, 320, 550, 650, 810, 100, 1000):
        fits = was >= milli
        assert (prices.regret(was[fits], was[fits] - milli, milli) >= 0).all()
    # nu 0: fgdb's model has no pairing term at all.
    assert StrandingModel(TYPICAL, lam=0.25, nu=0.0).device_delta(was, was, 230) == 0.0
