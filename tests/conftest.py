"""Suite-wide options.

``--soak``: long random runs (10**6 Tracker accesses instead of 20 000), and the tests marked
``soak``: whole-ring runs that repeat a mechanism the default suite runs once, long proofs.
``--waves``: cocotb runs write waveforms into their build folders.
``--seed N``: base seed of the random tests (default 1; the seed is printed on failure).
The rings build at ``-O1`` unless ``T3_CXX_OPT`` says otherwise.
Tests that take a ``sim`` argument run on both cocotb simulators, Verilator and Icarus; the
``SIM`` environment variable (``verilator`` or ``icarus``) restricts them to one.
"""

import dataclasses
import os

import pytest


# The rings' C++ built at -O1, not the -O3 of t3 run and t3 paper (sim.system.run.CXX_OPT):
# a suite's runs are short, so the build is most of a whole-ring test, and -O1 builds a ring
# about 8 s sooner and runs a 2-GPU one at 95 % of -O3's speed.  The paper records' key is
# checked against the default build (test_layout).  T3_CXX_OPT set by the caller wins.
os.environ.setdefault("T3_CXX_OPT", "-O1")


def pytest_addoption(parser):
    parser.addoption("--soak", action="store_true", help="long random runs")
    parser.addoption("--waves", action="store_true", help="cocotb runs write waveforms")
    parser.addoption("--seed", type=int, default=1, help="base seed of the random tests")


@dataclasses.dataclass(frozen=True)
class Options:
    soak: bool
    waves: bool
    seed: int

    @property
    def tracker_accesses(self):
        return 1_000_000 if self.soak else 20_000


@pytest.fixture
def t3_options(request):
    config = request.config
    return Options(config.getoption("--soak"), config.getoption("--waves"),
                   config.getoption("--seed"))


def pytest_collection_modifyitems(config, items):
    """Tests marked ``soak`` (whole-ring runs that repeat a mechanism another test covers in
    the default suite, long proofs) run with ``--soak`` only.  The ``cocotb`` tests (each
    builds or shares a simulator's model: the long ones) go first, in their order, so that
    under ``-n`` the many short tests fill the workers' last minutes instead of one worker
    running a ring alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("cocotb") is None)
    if config.getoption("--soak"):
        return
    skip = pytest.mark.skip(reason="a long run of a mechanism the default suite covers once: "
                                   "run with --soak")
    for item in items:
        if item.get_closest_marker("soak") is not None:
            item.add_marker(skip)


def pytest_generate_tests(metafunc):
    if "sim" in metafunc.fixturenames:
        from sim.harness.runner import SIMULATORS, default_sim
        sims = [default_sim()] if os.environ.get("SIM") else list(SIMULATORS)
        metafunc.parametrize("sim", sims)


def pytest_report_header(config):
    return f"T3: cocotb on {os.environ.get('SIM') or 'verilator and icarus'}, seed={config.getoption('--seed')}" \
           f"{' soak' if config.getoption('--soak') else ''}"
