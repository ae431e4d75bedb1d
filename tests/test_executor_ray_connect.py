"""How `--executor ray` finds its cluster, against a stand-in for the `ray` module (starting a
real cluster is what tests/test_sweep_ray.py does): without an address and without a cluster
running here it starts a local one and says so, as `ray.init()` does; an address given, or
RAY_ADDRESS, never starts one."""

from __future__ import annotations

import pytest

from cclab import executor_ray
from cclab.errors import CclabError

NO_CLUSTER = "Could not find any running Ray instance. Please specify the one to connect to by setting `--address` flag or `RAY_ADDRESS` environment variable."


class FakeRay:
    """`ray.init` as Ray answers on a machine where no cluster runs."""

    def __init__(self) -> None:
        self.inits: list[dict] = []
        self.initialized = False

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **kwargs: object) -> None:
        self.inits.append(kwargs)
        if kwargs.get("address") is not None:
            raise ConnectionError(NO_CLUSTER)
        self.initialized = True

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0, executor_ray.KERNEL_RESOURCE: 1.0}


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    ray = FakeRay()
    monkeypatch.setattr(executor_ray, "_import_ray", lambda: ray)
    monkeypatch.setattr(executor_ray, "_connected", [])
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return ray


def test_without_an_address_or_a_cluster_a_local_one_is_started_and_said(fake_ray: FakeRay, capsys: pytest.CaptureFixture[str]) -> None:
    assert executor_ray.connect(None) is fake_ray
    assert [init.get("address") for init in fake_ray.inits] == ["auto", None]
    assert fake_ray.inits[1]["resources"] == {executor_ray.KERNEL_RESOURCE: 1}
    assert capsys.readouterr().err == "--executor ray: no Ray cluster runs here; started a local one (2 CPUs) for this command\n"
    # Connected once: a second batch of the same command reuses it.
    assert executor_ray.connect(None) is fake_ray and len(fake_ray.inits) == 2


@pytest.mark.parametrize("address", ["auto", "10.0.0.1:6379"])
def test_an_address_given_never_starts_a_cluster(fake_ray: FakeRay, address: str) -> None:
    with pytest.raises(CclabError, match=f"cannot connect to the Ray cluster at {address}: Could not find any running Ray instance"):
        executor_ray.connect(address)
    assert len(fake_ray.inits) == 1


def test_ray_address_in_the_environment_never_starts_a_cluster(fake_ray: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    with pytest.raises(CclabError, match="cannot connect to the Ray cluster at auto"):
        executor_ray.connect(None)
    assert len(fake_ray.inits) == 1
