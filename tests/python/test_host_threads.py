"""Host threads share an instruction's rows (sim/hostpool.c): results and
simulated time must not depend on how many there are."""
import json
import os
import subprocess
import sys

SNIPPET = r"""
import hashlib, json, torch, torch_neuronsim
torch.manual_seed(0)
a = torch.randn(512, 1024).to(torch.bfloat16)
b = torch.randn(1024, 768).to(torch.bfloat16)
x = torch.randn(640, 2048)
d = torch.device("neuron")
outs = [torch.mm(a.to(d), b.to(d)),                      # bf16 TensorE products
        torch.mm(a.float().to(d), b.float().to(d)),      # fp32 (sgemm) products
        (x.to(d) * 3.0 + 1.0).exp(),                     # big elementwise + DMA
        x.to(d).t().contiguous(),                        # a transposing copy
        torch.log_softmax(x.to(d), -1),
        x.to(d).masked_fill(x.to(d) > 0.5, -1.0),        # select with a bool mask
        x.to(d).sum(-1)]                                 # row folds
h = hashlib.sha256()
for o in outs:
    h.update(o.cpu().contiguous().view(torch.uint8).numpy().tobytes())
s = torch_neuronsim.stats()
print(json.dumps({"digest": h.hexdigest(), "sim_ns": s["simulated_time_ns"],
                  "kernel_ns": s["kernel_time_ns"]}))
"""


def run(threads):
    env = dict(os.environ, NEURON_SIM="1", NEURON_SIM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_results_and_cycles_do_not_depend_on_host_threads():
    one, two, four = run(1), run(2), run(4)
    assert one == two == four, (one, two, four)


def test_bad_thread_count_runs_on_one_thread():
    env = dict(os.environ, NEURON_SIM="1", NEURON_SIM_THREADS="lots")
    p = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True, text=True,
                       check=True)
    assert "NEURON_SIM_THREADS='lots' is not a positive integer" in p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == run(1)
