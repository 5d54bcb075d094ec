import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge

from probekit.errors import ConfigError, DataError, NonFiniteError
from probekit.homomorphism import AffineOperator, BilinearOperator, MLPOperator
from probekit.homomorphism.operators import adam_fit, bilinear_features


def _xy(n=40, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 2 * d)), rng.normal(size=(n, d))


@pytest.mark.parametrize("n", [40, 7])  # primal (n > p) and dual (n <= p) solves
@pytest.mark.parametrize("alpha", [1e-3, 2.5])
def test_affine_equals_sklearn_ridge(n, alpha):
    X, Y = _xy(n)
    ref = Ridge(alpha=alpha).fit(X, Y)
    op = AffineOperator(alpha=alpha, solver="closed_form_ridge").fit(X, Y)
    np.testing.assert_allclose(op.coef_.numpy(), ref.coef_.T, atol=1e-9)
    np.testing.assert_allclose(op.predict(X[:5] + 1), ref.predict(X[:5] + 1), atol=1e-9)
    assert op.score(X, Y) == pytest.approx(ref.score(X, Y.copy()), abs=1e-9)


def test_bilinear_equals_ridge_on_product_features():
    X, Y = _xy()
    d = Y.shape[1]
    feats = np.concatenate([X, X[:, :d] * X[:, d:]], axis=1)
    ref = Ridge(alpha=0.1).fit(feats, Y)
    op = BilinearOperator(alpha=0.1, solver="closed_form_ridge").fit(X, Y)
    np.testing.assert_allclose(op.predict(X), ref.predict(feats), atol=1e-9)
    assert bilinear_features(torch.as_tensor(X)).shape == (40, 3 * d)


def test_batched_affine_equals_per_layer():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(3, 30, 8)), rng.normal(size=(3, 30, 4))
    batched = AffineOperator(alpha=0.5, solver="closed_form_ridge").fit(X, Y).predict(X)
    for layer in range(3):
        ref = Ridge(alpha=0.5).fit(X[layer], Y[layer]).predict(X[layer])
        np.testing.assert_allclose(batched[layer], ref, atol=1e-9)


def _torch_reference_mlp(X, Y, hidden, epochs, batch_size, seed):
    """[C]'s MLPOp trained as in compute_layerwise_he, initialised like adam_fit."""
    params = adam_fit(
        torch.as_tensor(X)[None], torch.as_tensor(Y)[None], hidden=hidden, epochs=0,
        batch_size=batch_size, lr=1e-3, weight_decay=1e-6, seed=seed,
    )
    fc1, fc2 = torch.nn.Linear(X.shape[1], hidden), torch.nn.Linear(hidden, Y.shape[1])
    with torch.no_grad():
        fc1.weight.copy_(params[0][0].T)
        fc1.bias.copy_(params[1][0])
        fc2.weight.copy_(params[2][0].T)
        fc2.bias.copy_(params[3][0])
    net = torch.nn.Sequential(fc1, torch.nn.GELU(), fc2)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-6)
    Xt, Yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(Y, dtype=torch.float32)
    for _ in range(epochs):
        for i in range(0, len(Xt), batch_size):
            loss = torch.nn.functional.mse_loss(net(Xt[i : i + batch_size]), Yt[i : i + batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return net(Xt).numpy()


def test_mlp_matches_torch_reference_training():
    X, Y = _xy(n=50, d=4)
    ours = MLPOperator(hidden=16, epochs=5, batch_size=16, random_state=3).fit(X, Y).predict(X)
    ref = _torch_reference_mlp(X, Y, hidden=16, epochs=5, batch_size=16, seed=3)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_mlp_batched_over_layers_equals_single_layer_runs():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(3, 40, 6)), rng.normal(size=(3, 40, 3))
    op = MLPOperator(hidden=8, epochs=3, batch_size=16).fit(X, Y)
    full = op.predict(X)
    for layer in range(3):
        one = MLPOperator(hidden=8, epochs=3, batch_size=16).fit(X[layer], Y[layer]).predict(X[layer])
        np.testing.assert_allclose(full[layer], one, atol=1e-6)


def test_adam_affine_converges_to_ridge():
    X, Y = _xy(n=200, d=3)
    Y = X @ np.random.default_rng(0).normal(size=(6, 3)) + 0.5
    op = AffineOperator(solver="adam", epochs=600, lr=1e-2, batch_size=200).fit(X, Y)
    assert op.score(X, Y) > 0.999


def test_bad_inputs():
    X, Y = _xy()
    with pytest.raises(DataError, match="one target row per input pair"):
        AffineOperator().fit(X, Y[:-1])
    with pytest.raises(DataError, match=r"\(pair, features\)"):
        AffineOperator().fit(X[0], Y[0])
    with pytest.raises(NonFiniteError):
        AffineOperator().fit(np.where(X > 2, np.nan, X), Y)
    with pytest.raises(ConfigError, match="not fitted"):
        AffineOperator().predict(X)
    with pytest.raises(ConfigError, match="closed_form_ridge"):
        AffineOperator(solver="sgd").fit(X, Y)


def test_default_solver_is_cs_adam_fit():
    # the estimators default to [C]'s 50-epoch Adam schedule, not the closed form
    X, Y = _xy(n=60, d=3)
    default = AffineOperator().fit(X, Y)
    adam = AffineOperator(solver="adam", epochs=50, batch_size=128, lr=1e-3,
                          weight_decay=1e-6).fit(X, Y)
    np.testing.assert_allclose(default.predict(X), adam.predict(X), atol=0)
    exact = AffineOperator(solver="closed_form_ridge", alpha=0.0).fit(X, Y)
    assert exact.score(X, Y) > default.score(X, Y) + 0.05
