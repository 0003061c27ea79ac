"""DCA component features and the class-as-extra-group classifier (Buntine & Jakulin Section 9; digest §1.9B)."""

import numpy as np
import pytest

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.dca.features import DCAClassifier, DCAFeatures, component_features, fold_in_features
from latentfs.models import ConditionalGammaPoissonDCA

K, J = 6, 80


def _corpus(n, seed, theta):
    """Three classes; class c mixes components 2c and 2c+1 (plus a little of the rest)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    alpha = np.full((3, K), 0.05)
    for c in range(3):
        alpha[c, 2 * c : 2 * c + 2] = 1.0
    m = np.stack([rng.dirichlet(alpha[c]) for c in y])
    X = np.stack([rng.multinomial(60, p) for p in m @ theta]).astype(float)
    return X, y


@pytest.fixture(scope="module")
def data():
    theta = np.random.default_rng(0).dirichlet(np.full(J, 0.1), size=K)
    return _corpus(300, 1, theta), _corpus(200, 2, theta)


@pytest.fixture(scope="module")
def dm_result(data):
    (X, _), _ = data
    return latentfs.fit(latentfs.DirichletDCA(K, alpha=0.3), X, method="vb", seed=0, warn=False)


def test_component_counts_sum_to_document_lengths_and_respect_the_threshold(dm_result, data):
    (X, _), _ = data
    F = component_features(dm_result)
    raw = dm_result.extras["component_counts"]
    assert np.array_equal(F, np.where(raw >= 0.01, raw, 0.0))
    assert np.allclose(F.sum(1), X.sum(1), atol=0.01 * K)  # Σ_k E[c_k] = L, less what the threshold drops
    assert (component_features(dm_result, threshold=1e9) == 0).all()
    P = component_features(dm_result, kind="proportions")
    assert np.allclose(P.sum(1), 1.0)


def test_fold_in_is_a_fixed_point_of_the_document_update(dm_result, data):
    _, (X_test, _) = data
    theta = dm_result.mean("topic_word")
    alpha = np.asarray(dm_result.hyperparameters["alpha"])
    counts = fold_in_features(dm_result, X_test, threshold=0.0)
    a = counts + alpha
    from scipy.special import digamma

    e = np.exp(digamma(a) - digamma(a.sum(1, keepdims=True)))
    z = e @ theta
    again = alpha + e * ((X_test / z) @ theta.T)  # one more eq. (17) update with Θ fixed
    assert np.allclose(again, a, atol=1e-5)
    assert np.allclose(counts.sum(1), X_test.sum(1))
    empty = fold_in_features(dm_result, np.zeros((1, J)), threshold=0.0)
    assert np.allclose(empty, 0.0)  # a document with no tokens keeps its prior: E[c] = 0


def test_component_features_classify_well_above_chance(data):
    from sklearn.linear_model import LogisticRegression

    (X, y), (X_test, y_test) = data
    feats = DCAFeatures(latentfs.DirichletDCA(K, alpha=0.3), kind="proportions", fit_options={"warn": False})
    train = feats.fit_transform(X)
    test = feats.transform(X_test)
    assert train.shape == (300, K) and test.shape == (200, K)
    accuracy = LogisticRegression(max_iter=2000).fit(train, y).score(test, y_test)
    assert accuracy > 0.85  # chance is 1/3; measured 0.955


@pytest.mark.parametrize("method, options", [
    ("vb", {"warn": False}),
    ("gibbs", {"num_warmup": 100, "num_samples": 20, "num_chains": 1, "log_likelihood": False}),
])
def test_class_as_extra_group_classifier(data, method, options):
    (X, y), (X_test, y_test) = data
    labels = np.array(["earn", "grain", "trade"])
    clf = DCAClassifier(K, alpha=0.3, method=method, fit_options=options).fit(X, labels[y])
    proba = clf.predict_proba(X_test)
    assert proba.shape == (200, 3) and np.allclose(proba.sum(1), 1.0) and (proba >= 0).all()
    assert clf.classes_.tolist() == labels.tolist()
    assert (clf.predict(X_test) == labels[y_test]).mean() > 0.85  # chance 1/3; measured 0.95
    # the class group of the fitted model is one multinomial: normalised within the group
    theta = clf.result_.mean("topic_word")
    assert np.allclose(theta[:, J:].sum(1), 1.0) and np.allclose(theta[:, :J].sum(1), 1.0)


def test_gap_and_cgp_features_by_fold_in(data):
    (X, _), (X_test, _) = data
    gap = latentfs.fit(latentfs.GammaPoissonDCA(K, alpha=0.3), X, method="vb", seed=0, warn=False)
    F = fold_in_features(gap, X_test, kind="proportions")
    assert F.shape == (200, K) and np.allclose(F.sum(1), 1.0)
    cgp = latentfs.fit(ConditionalGammaPoissonDCA(K, alpha=0.3, rho=0.5), X, method="vb", seed=0, max_iter=50,
                       warn=False)
    counts = fold_in_features(cgp, X_test)
    assert np.allclose(counts.sum(1), X_test.sum(1), atol=0.01 * K)
    assert (counts == 0).mean() > 0.2  # CGP switches components off: sparse features
    assert component_features(cgp).shape == (300, K)


def test_bad_inputs_are_rejected(dm_result, data):
    (X, y), _ = data
    with pytest.raises(DataError, match="kind must be one of"):
        component_features(dm_result, kind="tfidf")
    with pytest.raises(DataError, match="threshold must be a finite non-negative number"):
        component_features(dm_result, threshold=-1.0)
    with pytest.raises(DataError, match="result must be a fitted DCA Posterior"):
        component_features(np.zeros((2, 2)))
    with pytest.raises(DataError, match=r"X must have 80 features \(the fitted vocabulary\)"):
        fold_in_features(dm_result, np.ones((2, 5)))
    with pytest.raises(DataError, match="max_iter must be a positive integer"):
        fold_in_features(dm_result, X[:2], max_iter=0)
    no_counts = latentfs.Posterior(model="DirichletDCA", method="map", dims={}, coords={}, trace=np.zeros(1),
                                   fitted={"topic_word": {"family": "point", "value": np.ones((1, 2))}})
    with pytest.raises(DataError, match=r"result must hold extras\['component_counts'\]"):
        component_features(no_counts)
    with pytest.raises(DataError, match="this DCAFeatures is not fitted yet"):
        DCAFeatures(latentfs.DirichletDCA(2)).transform(X)
    with pytest.raises(DataError, match="this DCAClassifier is not fitted yet"):
        DCAClassifier(2).predict(X)
    with pytest.raises(DataError, match="class_tokens must be a positive integer"):
        DCAClassifier(2, class_tokens=0).fit(X, y)
    with pytest.raises(DataError, match="method must be 'vb' or 'gibbs'"):
        DCAClassifier(2, method="em").fit(X, y)
    with pytest.raises(DataError, match="y must have one label per sample"):
        DCAClassifier(2).fit(X, y[:10])
    with pytest.raises(DataError, match=r"groups must have one entry per feature \(80\)"):
        DCAClassifier(2, groups=[0, 1]).fit(X, y)
    clf = DCAClassifier(2, fit_options={"max_iter": 5, "warn": False}).fit(X[:40], y[:40])
    with pytest.raises(DataError, match=r"X must have 80 features \(as in fit\)"):
        clf.predict_proba(np.ones((2, 3)))


def _imbalanced(n, seed, theta):
    """Two classes, 8 % minority; the minority mixes components 4–5 (and some of 2), the majority 0–3."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.08).astype(int)
    alpha = np.full((2, K), 0.05)
    alpha[0, :4], alpha[1, 4:], alpha[1, 2] = 1.0, 1.0, 0.5
    m = np.stack([rng.dirichlet(alpha[c]) for c in y])
    return np.stack([rng.multinomial(60, p) for p in m @ theta]).astype(float), y


@pytest.fixture(scope="module")
def imbalanced():
    theta = np.random.default_rng(0).dirichlet(np.full(J, 0.1), size=K)
    (X, y), (X_test, y_test) = _imbalanced(400, 1, theta), _imbalanced(600, 2, theta)
    clf = DCAClassifier(2, alpha=0.3, class_prior="uniform", fit_options={"warn": False, "num_ll_draws": 0}).fit(X, y)
    return clf, X_test, y_test, np.bincount(y).astype(float)


def test_classifier_class_prior_gives_the_minority_class_sensible_recall(imbalanced):
    from sklearn.metrics import balanced_accuracy_score, recall_score

    clf, X_test, y_test, train_counts = imbalanced
    assert 0.05 < y_test.mean() < 0.11 and 0.05 < train_counts[1] / train_counts.sum() < 0.11
    pred = clf.predict(X_test)
    # without a class prior (the model's own posterior, class_prior="model") the minority recall was 0.000
    assert recall_score(y_test, pred) >= 0.8  # measured 0.98
    assert balanced_accuracy_score(y_test, pred) >= 0.7  # measured 0.75
    assert np.allclose(clf.class_prior_, 0.5)
    # the same fit under other priors: Bayes' rule only reweights the class likelihoods
    for prior in ("model", "fitted", [0.2, 0.8]):
        other = DCAClassifier(2, alpha=0.3, class_prior=prior)
        other.result_, other.classes_, other.n_features_in_ = clf.result_, clf.classes_, clf.n_features_in_
        other.class_prior_ = other._resolve_prior(train_counts)
        proba = other.predict_proba(X_test)
        assert np.allclose(proba.sum(1), 1.0)
        if prior == "model":
            assert recall_score(y_test, other.predict(X_test)) < 0.2  # the defect: majority only
        if prior == [0.2, 0.8]:
            assert recall_score(y_test, other.predict(X_test)) >= recall_score(y_test, pred)
    # a decision threshold on P(minority | w)
    low = DCAClassifier(2, alpha=0.3, class_prior="model", threshold=0.1)
    low.result_, low.classes_, low.n_features_in_ = clf.result_, clf.classes_, clf.n_features_in_
    low.class_prior_ = None
    assert recall_score(y_test, low.predict(X_test)) >= 0.5


def test_classifier_prior_and_threshold_are_checked(data):
    (X, y), _ = data
    with pytest.raises(DataError, match="class_prior must be 'fitted', 'uniform', 'model'"):
        DCAClassifier(K, class_prior="balanced").fit(X, y)
    with pytest.raises(DataError, match="class_prior must hold 3 positive numbers"):
        DCAClassifier(K, class_prior=[0.5, 0.5]).fit(X, y)
    with pytest.raises(DataError, match="threshold applies to two classes; got 3"):
        DCAClassifier(K, threshold=0.3).fit(X, y)
    with pytest.raises(DataError, match=r"threshold must be a number in \(0, 1\)"):
        DCAClassifier(K, threshold=1.5).fit(X[y < 2], y[y < 2])


@pytest.mark.filterwarnings("ignore::latentfs.core.driver.ConvergenceWarning")  # default run lengths, 2 chains
@pytest.mark.parametrize("method", ["gibbs", "collapsed_gibbs"])
def test_sampler_features_agree_with_their_own_fold_in(method):
    model = latentfs.DirichletDCA(3, alpha=0.3)
    X = model.simulate(120, 30, doc_length=50, seed=0)["counts"]
    feats = DCAFeatures(model, method=method, fit_options={"num_chains": 2})
    fitted = feats.fit_transform(X)
    assert fitted.shape == (120, 3) and np.allclose(fitted.sum(1), 50, atol=0.05 * 3)  # rows are documents
    again = feats.transform(X)
    # before: chains averaged in their own label orders, 43 % agreement; measured now 1.00 / 0.99
    assert (fitted.argmax(1) == again.argmax(1)).mean() >= 0.9


def test_component_counts_in_another_shape_are_refused(dm_result):
    import copy

    per_chain = copy.copy(dm_result)
    counts = dm_result.extras["component_counts"]
    per_chain.extras = {**dm_result.extras, "component_counts": np.stack([counts, counts])}
    with pytest.raises(DataError, match=r"must have shape \(documents, components\) = \(300, 6\).*per chain"):
        component_features(per_chain)
    per_chain.extras = {**dm_result.extras, "component_counts": counts.T}
    with pytest.raises(DataError, match="Refit with a current engine"):
        component_features(per_chain)
