"""One 3-broker cluster over a real etcd (the test settings of
compat_tests/cluster_harness.py) for every module of this package: its modules run
one after another, and the cluster stops after the last (a broker that logged a
traceback fails that teardown). Starting it once instead of once per module saves
the suite a cluster start and stop per module.

A test may kill a broker if it starts it again (in a `finally`): after each test,
every broker must be running (one found dead is started again, and the test fails)
and each must know the three of them before the next test begins."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat_tests.cluster_harness import WeirCluster, restore, running_cluster


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    """The package's cluster (see the module)."""
    with running_cluster(tmp_path_factory.mktemp("http-cluster")) as weir:
        yield weir


@pytest.fixture(autouse=True)
def _cluster_left_whole(cluster: WeirCluster) -> Iterator[None]:
    yield
    dead = restore(cluster)
    if dead:
        pytest.fail(f"the test left brokers {dead} of the shared cluster dead (started again)")
