"""Two hosts: scripts/two_hosts.sh runs a 2-rank job across two network
namespaces, each with its own address, torchrun's rendezvous on the first's;
the neuron backend's collectives cross the veth link (Gloo), DDP training
gives one process's weights, and the namespaces are gone afterwards."""
import json
import os
import pathlib
import subprocess
import textwrap
import uuid

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def netns_available():
    if os.geteuid() != 0:
        return False
    name = f"nsim-probe-{uuid.uuid4().hex[:8]}"
    ok = subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return ok


@pytest.mark.skipif(not netns_available(), reason="needs root and network namespaces (ip netns)")
def test_a_two_rank_job_across_two_namespaces(tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text(textwrap.dedent("""
        import json, os, sys, torch, torch.distributed as dist
        dist.init_process_group(backend="neuron")
        r = dist.get_rank()
        x = torch.full((4,), float(r + 1)).to("neuron")
        dist.all_reduce(x)
        addrs = [None, None]
        dist.all_gather_object(addrs, os.environ["NSIM_HOST_ADDR"])
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).to("neuron")
        ddp = torch.nn.parallel.DistributedDataParallel(m)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        data = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))
        ddp(data[2 * r:2 * r + 2].to("neuron")).pow(2).mean().backward()
        opt.step()
        with open(os.path.join(sys.argv[1], f"rank{r}.json"), "w") as f:
            json.dump({"sum": x.cpu().tolist(), "addrs": addrs,
                       "w": m[0].weight.detach().cpu().flatten().tolist()}, f)
        dist.destroy_process_group()
    """))
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    r = subprocess.run(["bash", str(ROOT / "scripts" / "two_hosts.sh"), str(worker), str(tmp_path)],
                       env=dict(os.environ, NEURON_SIM="1"), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{k}.json").read_text()) for k in (0, 1)]
    addrs = ranks[0]["addrs"]
    assert addrs == ranks[1]["addrs"] and addrs[0] != addrs[1] and all(a.startswith("10.77.") for a in addrs)
    assert ranks[0]["sum"] == ranks[1]["sum"] == [3.0] * 4
    # one process, the whole batch
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m(torch.randn(4, 8, generator=torch.Generator().manual_seed(2))).pow(2).mean().backward()
    opt.step()
    for k in (0, 1):
        torch.testing.assert_close(torch.tensor(ranks[k]["w"]), m[0].weight.detach().flatten(), rtol=1e-5, atol=1e-6)
    # the script removed what it made
    assert subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout == before
