"""Raw text through a trained topic model: model.h5 keeps the training corpus's tokeniser, bnpvi-apply counts
new lines under the run's vocabulary (and says how many tokens it dropped), and the topic estimators fit and
transform lists of strings (bnpvi/api/fitted_topics.py, bnpvi/api/topic_estimators.py, bnpvi/cli/apply.py)."""
from __future__ import annotations

import numpy as np
import pytest

import bnpvi
from bnpvi.data.convert import convert
from bnpvi.data.tokens import count_texts
from bnpvi.learn import runner
from setups import apply_cli, assert_one_line_error, compose, moved_away, read_h5

THEMES = ["goal match team score coach", "vote party law court senate", "star planet orbit moon comet"]


def lines(n: int, seed: int) -> list[str]:
    """Documents of two themes' words, with stop words and capitals a tokeniser must handle."""
    rng = np.random.default_rng(seed)
    words = [theme.split() for theme in THEMES]
    return [" ".join(["The"] + [w.capitalize() if i % 3 == 0 else w for i, w in
                                enumerate(rng.choice(words[a] + words[b], 8))] + ["and", "of"])
            for a, b in (rng.choice(3, 2, replace=False) for _ in range(n))]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An HDP topic model trained on a corpus converted from raw text with English stop words."""
    tmp = tmp_path_factory.mktemp("apply_text")
    (tmp / "corpus.txt").write_text("\n".join(lines(300, 0)) + "\n")
    data = convert(tmp / "corpus.txt", tmp / "corpus.h5", n_batches=2, text=True, stop_words="english")
    run_dir = tmp / "run"
    runner.train(compose("model=hdp_topic", "data=hdf5", f"data.path={data}", "alg.n_laps=5"), run_dir)
    return tmp, run_dir, data


def test_the_model_keeps_the_tokeniser_and_counts_new_text_as_the_corpus_was(trained):
    _, run_dir, _ = trained
    fitted = bnpvi.load(run_dir)
    assert fitted.text_settings_ is not None and "the" in fitted.text_settings_.stop_words
    assert sorted(fitted.vocabulary_) == sorted(" ".join(THEMES).split())
    counts, unknown = fitted.count_text(["The GOAL and the goal of a zebra", "moon"])
    assert unknown == 1  # "zebra" ("a" is no token: one letter; "the", "and", "of" are stop words)
    assert counts[0, fitted.vocabulary_.index("goal")] == 2 and counts.sum() == 3
    np.testing.assert_array_equal(fitted.transform(["The GOAL and the goal of a zebra", "moon"]),
                                  fitted.transform(counts))


def test_bnpvi_apply_on_new_lines_drops_unknown_words_and_says_how_many(trained, tmp_path):
    tmp, run_dir, data = trained
    new = lines(7, 1) + ["zebra quagga", "Match TEAM zebra"]
    (tmp_path / "new.txt").write_text("\n".join(new) + "\n")
    fitted = bnpvi.load(run_dir)
    with moved_away(data, tmp / "elsewhere.h5"):  # the training file is not needed
        proc = apply_cli(run_dir, tmp_path / "new.txt", tmp_path / "out.h5")
    assert proc.returncode == 0, proc.stderr
    assert "9 documents; 3 of " in proc.stdout and "tokens dropped as not in the model's vocabulary" in proc.stdout
    out = read_h5(tmp_path / "out.h5")
    np.testing.assert_array_equal(out["index"], np.arange(9))
    np.testing.assert_array_equal(out["uids"], fitted.cluster_ids_)
    expected = fitted.transform(count_texts(new, fitted.vocabulary_, fitted.text_settings_)[0])
    np.testing.assert_array_equal(out["proportions"], expected)
    assert (tmp_path / "out.csv").read_text().count("\n") == 10


def test_raw_text_is_refused_on_one_line_by_a_model_of_another_kind(tmp_path):
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "points.csv", rng.normal(size=(60, 2)), delimiter=",")
    data = convert(tmp_path / "points.csv", tmp_path / "points.h5")
    runner.train(compose("data=hdf5", f"data.path={data}", "alg.n_laps=2"), tmp_path / "run")
    (tmp_path / "new.txt").write_text("some words\n")
    proc = apply_cli(tmp_path / "run", tmp_path / "new.txt", tmp_path / "out.h5")
    assert_one_line_error(proc, "raw text applies to topic models only")
    assert not (tmp_path / "out.h5").exists()


def test_topic_estimators_fit_and_transform_raw_texts():
    texts = lines(120, 2)
    model = bnpvi.HDPTopicModel(random_state=0, n_laps=5).fit(texts)
    assert model.vocabulary_ is not None and "the" not in model.vocabulary_
    assert model.n_features_in_ == len(model.vocabulary_)
    weights = model.transform(texts[:3])
    np.testing.assert_array_equal(weights, model.fitted_model_.transform(model.fitted_model_.count_text(texts[:3])[0]))
    coherence = model.coherence(texts, top_n=3)
    assert coherence.shape == (model.n_components_,) and np.all((coherence >= -1) & (coherence <= 1))
    assert bnpvi.HDPTopicModel(stop_words="none", n_laps=2).fit(texts).vocabulary_.count("the") == 1
    with pytest.raises(bnpvi.BnpviError, match="raw texts make their own vocabulary"):
        bnpvi.HDPTopicModel(n_laps=2).fit(texts, vocabulary=["a"])
