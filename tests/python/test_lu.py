"""LU, triangular and Cholesky solves and determinants composed from
native kernels (aten/linalg/lu.cpp) against CPU PyTorch (LAPACK), fp32:
square, wide, tall, batched, broadcast, empty and 129-row matrices; every
left / adjoint / upper / transpose / unit combination; singular and
non-positive-definite inputs raise CPU's errors."""
import pytest
import torch

import torch_neuronsim
from nsim_util import assert_native_matches

SHAPES = [(5, 5), (3, 5), (5, 3), (2, 4, 4), (0, 3, 3), (1, 1), (129, 129), (2, 3, 6, 6)]


def close(fn, *args):
    """natively, within LAPACK's rounding (a blocked, recursive factorization)"""
    dev = [a.to("neuron") for a in args]
    before = torch_neuronsim.stats()["cpu_fallbacks"]
    got = fn(*dev)
    assert torch_neuronsim.stats()["cpu_fallbacks"] == before, "ran on the CPU"
    want = fn(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_lu_factor_unpack_and_determinants(shape):
    A = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
    close(torch.linalg.lu_factor_ex, A)
    close(torch.linalg.lu, A)
    close(lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)), A)
    if shape[-1] == shape[-2]:
        close(torch.linalg.det, A)
        close(torch.linalg.slogdet, A)
        close(torch.logdet, A @ A.mT + torch.eye(shape[-1]))
        close(torch.linalg.inv, A)
        close(torch.linalg.inv_ex, A)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[-1] == s[-2]], ids=str)
def test_solves(shape):
    g = torch.Generator().manual_seed(7)
    A = torch.randn(shape, generator=g)
    B = torch.randn(shape[:-1] + (3,), generator=g)
    close(torch.linalg.solve, A, B)
    close(lambda a, b: torch.linalg.solve(a, b.mT, left=False), A, B)
    close(torch.linalg.solve, A, torch.randn(shape[:-1], generator=g))
    for adjoint in (False, True):
        for left in (True, False):
            close(lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b if left else b.mT, left=left,
                                                     adjoint=adjoint), A, B)
    for upper in (True, False):
        # well conditioned at every size (a random triangle's condition number grows exponentially)
        T = (A.triu() if upper else A.tril()) / max(1, shape[-1]) ** 0.5 + 3 * torch.eye(shape[-1])
        for transpose in (True, False):
            for unit in (True, False):
                close(lambda a, b: torch.triangular_solve(b, a, upper=upper, transpose=transpose, unitriangular=unit),
                      T, B)
        P = A @ A.mT + shape[-1] * torch.eye(shape[-1])
        close(lambda a: torch.linalg.cholesky(a, upper=upper), P)
        close(lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a, upper=upper), upper=upper), P, B)
        close(lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a, upper=upper), upper=upper), P)


def test_broadcast_batches():
    close(lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b), torch.randn(3, 3), torch.randn(2, 3, 2))
    close(torch.linalg.solve, torch.randn(2, 1, 3, 3), torch.randn(4, 3, 2))


def test_singular_and_indefinite_inputs_raise_cpus_errors():
    S = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    assert_native_matches(torch.linalg.det, S)
    assert_native_matches(torch.linalg.lu_factor_ex, S)
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.solve(S.to("neuron"), torch.ones(2, device="neuron"))
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.inv(S.to("neuron"))
    with pytest.raises(torch.linalg.LinAlgError, match="positive-definite"):
        torch.linalg.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]], device="neuron"))


def test_gradients_match_cpu():
    """det / slogdet factor A^T for a contiguous A, as CPU's (their
    backward solves with the returned LU accordingly)"""
    A = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    B = torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(3))
    for a0 in (A, B, B.mT):
        for fn in (torch.linalg.det, lambda a: torch.linalg.slogdet(a)[1],
                   lambda a: torch.linalg.solve(a, torch.ones(a.shape[:-1], device=a.device)),
                   lambda a: torch.linalg.inv(a)):
            grads = []
            for dev in ("cpu", "neuron"):
                a = a0.detach().clone().to(dev).requires_grad_()
                fn(a).sum().backward()
                grads.append(a.grad.cpu())
            torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-4)


def test_large_matrices_run_on_the_cpu_counted():
    """sides over 1024: the unblocked factorization's n host steps would
    take minutes; CPU's LAPACK runs them, counted"""
    A = torch.randn(1025, 1025, generator=torch.Generator().manual_seed(2))
    torch_neuronsim.reset_stats()
    got = torch.linalg.det(A.to("neuron"))
    assert torch_neuronsim.stats()["fallback_ops"] == {"aten::_linalg_det.result": 1}
    torch.testing.assert_close(got.cpu(), torch.linalg.det(A))
