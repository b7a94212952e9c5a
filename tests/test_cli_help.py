"""``bnpvi-train --help``: every option and every key of the chosen options, each key with its default and
its one-line description; the descriptions come from the schemas, so every key must have one."""
import dataclasses

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from bnpvi.cli import train as cli
from bnpvi.config import GROUPS, INTERNAL_KEYS, SCHEMAS, TrainConfig, register_configs, summary_of, user_keys

OPTIONS = [(group, option) for group, options in SCHEMAS.items() for option in options]


@pytest.mark.parametrize("schema", [TrainConfig, *(SCHEMAS[g][o] for g, o in OPTIONS)], ids=lambda s: s.__name__)
def test_every_key_has_a_one_line_description(schema):
    for field in dataclasses.fields(schema):
        if field.name in INTERNAL_KEYS or (schema is TrainConfig and field.name in GROUPS):
            continue
        text = field.metadata.get("help", "")
        assert text.strip() and "\n" not in text, f"{schema.__name__}.{field.name} has no one-line description"
    assert summary_of(schema), f"{schema.__name__} has no docstring"


def composed(group, option):
    register_configs()
    choice = f"moves=[{option}]" if group == "moves" else f"{group}={option}"
    with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
        cfg = compose(config_name="train", overrides=[choice])
    return cfg.moves[option] if group == "moves" else cfg[group]


@pytest.mark.parametrize("group, option", OPTIONS)
def test_each_option_sets_exactly_its_schemas_keys(group, option):
    """The YAML file gives a default to every key the schema declares (``???``: to be set by the user)."""
    node = OmegaConf.to_container(composed(group, option), resolve=False)
    assert [k for k in node if k not in INTERNAL_KEYS] == user_keys(SCHEMAS[group][option])


def help_text(capsys, *args):
    cli.main([*args, "--help"])
    return capsys.readouterr().out


def test_help_shows_the_chosen_options_keys_with_defaults_and_descriptions(capsys):
    text = help_text(capsys, "model=hdp_topic", "init=from_run")
    assert "_schema" not in text
    assert "* hdp_topic" in text and "* from_run" in text and "* mult" in text  # hdp_topic's default family
    lines = text.splitlines()
    for group in ("model", "obs", "alg", "init", "data"):
        option = {"model": "hdp_topic", "obs": "mult", "alg": "memo", "init": "from_run", "data": "toy"}[group]
        for key in user_keys(SCHEMAS[group][option]):
            (line,) = [line for line in lines if line.strip().startswith(f"{group}.{key}=")]
            assert line.split(None, 1)[1:], f"{group}.{key} has no description in --help"
    assert any(line.strip().startswith("model.alpha=0.5 ") for line in lines)
    assert any(line.strip().startswith("init.path=???") for line in lines)
    assert "DP concentration" not in text  # dp_mix's key is not shown for hdp_topic


def test_help_lists_the_keys_of_the_moves_that_are_on(capsys):
    text = help_text(capsys, "moves=[merge]")
    assert "moves.merge.max_pairs=100" in text and "moves.birth.n_new" not in text


def test_help_with_a_bad_override_is_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["model.nope=1", "--help"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown key model.nope" in err[0]
