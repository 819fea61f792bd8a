"""Each of --jobs N workers gets its own devices (the backend's variable) or its core share."""

import pytest

from torchport.config import ConfigError, RunConfig
from torchport.devices import get_adapter
from torchport.runner.executors.shares import worker_device, worker_shares


class FakeGPUs:
    """The CUDA adapter's splitting, with a device count chosen by the test."""

    def __init__(self, count, name="cuda"):
        self.adapter = get_adapter(name)
        self.adapter.device_info = lambda: {"device_count": count}


def test_each_worker_owns_one_device_and_a_core_share():
    shares = worker_shares(FakeGPUs(4).adapter, 2, {}, cores=16)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in shares] == ["0", "1"]
    assert all(s.threads == 8 and s.env["OMP_NUM_THREADS"] == "8" for s in shares)
    assert worker_device("cuda", FakeGPUs(4).adapter, shares[1]) == "cuda"


def test_a_restriction_already_in_place_is_kept():
    shares = worker_shares(FakeGPUs(2).adapter, 2, {"CUDA_VISIBLE_DEVICES": "5,7"}, cores=2)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in shares] == ["5", "7"]


def test_each_backend_exports_its_own_variable():
    neuron = FakeGPUs(2, "neuron").adapter
    assert worker_shares(neuron, 2, {}, cores=2)[1].env["NEURON_RT_VISIBLE_CORES"] == "1"
    npu = FakeGPUs(2, "npu").adapter
    assert worker_shares(npu, 2, {}, cores=2)[1].env["ASCEND_RT_VISIBLE_DEVICES"] == "1"


def test_more_jobs_than_devices_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="--jobs 3 needs 3 cuda device"):
        worker_shares(FakeGPUs(2).adapter, 3, {}, cores=2)


def test_an_index_with_jobs_is_refused():
    adapter = FakeGPUs(4).adapter
    adapter.index = 1
    with pytest.raises(ConfigError, match="name the device family"):
        worker_shares(adapter, 2, {}, cores=2)


def test_cpu_workers_split_the_cores():
    shares = worker_shares(get_adapter("cpu"), 2, {}, cores=2)
    assert [(s.slot, s.threads, s.devices) for s in shares] == [(0, 1, ()), (1, 1, ())]
    assert shares[0].env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert worker_device("cpu", get_adapter("cpu"), shares[0]) == "cpu"
    assert worker_shares(get_adapter("simdev"), 3, {}, cores=2)[2].threads == 1


def test_a_device_that_cannot_be_split_refuses_jobs():
    with pytest.raises(ConfigError, match="cannot be split"):
        worker_shares(get_adapter("mps"), 2, {}, cores=2)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"jobs": 0}, "--jobs must be a positive integer"),
        ({"executor": "slurm"}, "unknown executor 'slurm'"),
        ({"ray_address": "auto"}, "--ray-address needs --executor ray"),
        ({"executor": "ray", "ray_retries": -1}, "--ray-retries must be >= 0"),
    ],
)
def test_config_validates_the_executor_fields(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(**kwargs)


def test_ray_asks_for_its_own_resource_or_a_custom_one():
    from torchport.runner.executors.ray_executor import resource_request

    cluster = {"CPU": 16.0, "GPU": 4.0, "device:simdev": 2.0}
    options, threads = resource_request(FakeGPUs(4).adapter, jobs=4, cluster=cluster, node_cpus=8)
    assert options == {"num_cpus": 1, "num_gpus": 1} and threads == 4
    options, _ = resource_request(get_adapter("simdev"), jobs=2, cluster=cluster, node_cpus=8)
    assert options == {"num_cpus": 8, "resources": {"device:simdev": 1}}
    options, threads = resource_request(get_adapter("cpu"), jobs=4, cluster=cluster, node_cpus=8)
    assert options == {"num_cpus": 4} and threads == 4
    with pytest.raises(ConfigError, match="offers 4"):
        resource_request(FakeGPUs(8).adapter, jobs=5, cluster=cluster, node_cpus=8)
    with pytest.raises(
        ConfigError, match="no node of the Ray cluster offers resource 'neuron_cores'"
    ):
        resource_request(get_adapter("neuron"), jobs=1, cluster=cluster, node_cpus=8)
