"""Map-valued recipe fields take new keys as written (no Hydra `+`), while a
misspelt fixed field is still an error."""
from __future__ import annotations

import pytest

from launcher.login.config.compose import map_fields, open_map_overrides
from launcher.login.errors import ConfigError


def test_map_fields_are_found_in_the_schema():
    maps = map_fields()
    for f in ("bench.gates.min_acceptance_length", "sweep.dataset_paths", "server.env", "cluster.env",
              "draft.extra", "sweep.runtime_params.sampling_kwargs"):
        assert f in maps
    assert "bench.gates" not in maps and "sweep.temperatures" not in maps


def test_only_overrides_inside_map_fields_are_opened():
    maps = {"bench.gates.min_acceptance_length"}
    assert open_map_overrides(["bench.gates.min_acceptance_length.mtbench=2", "bench.gates.min_acceptance_lengthX=1",
                               "+bench.gates.min_acceptance_length.a=1", "bench.gates.min_acceptance_length={a:1}",
                               "++bench.gates.min_acceptance_length.b=1", "~bench.gates.min_acceptance_length.c",
                               "bench.gates.min_acceptance_length.mt-bench=3", "recipe=smoke"], maps) == [
        "++bench.gates.min_acceptance_length.mtbench=2", "bench.gates.min_acceptance_lengthX=1",
        "++bench.gates.min_acceptance_length.a=1", "++bench.gates.min_acceptance_length={a:1}",
        "++bench.gates.min_acceptance_length.b=1", "~bench.gates.min_acceptance_length.c",
        "++bench.gates.min_acceptance_length.mt-bench=3", "recipe=smoke"]


@pytest.mark.parametrize("override", ["bench.gates.min_acceptance_length.mtbench=2.0",
                                      "bench.gates.min_acceptance_length={mtbench:2.0}",
                                      "+bench.gates.min_acceptance_length.mtbench=2.0"])
def test_a_gate_per_dataset_as_written(compose, override):
    cfg = compose(override)
    assert cfg.bench.gates.min_acceptance_length == {"mtbench": 2.0}


def test_new_keys_in_other_maps(compose):
    cfg = compose("server.env.MY_FLAG=1", "sweep.runtime_params.sampling_kwargs.top_k=5",
                  "sweep.dataset_paths.speed_qualitative=/data/q.parquet")
    assert cfg.server.env["MY_FLAG"] == "1"
    assert cfg.sweep.runtime_params.sampling_kwargs["top_k"] == 5
    assert cfg.sweep.dataset_paths["speed_qualitative"] == "/data/q.parquet"
    assert "mtbench" in cfg.sweep.dataset_paths  # the recipe's own entries stay


def test_a_wrong_value_type_in_a_map_names_the_key(compose):
    with pytest.raises(ConfigError) as e:
        compose("bench.gates.min_acceptance_length.mtbench=abc")
    assert "bench.gates.min_acceptance_length.mtbench" in str(e.value) and "float" in str(e.value)


def test_a_misspelt_fixed_field_is_still_unknown(compose):
    with pytest.raises(ConfigError) as e:
        compose("bench.gatez.min_acceptance_length.mtbench=2.0")
    assert "bench.gatez" in str(e.value) and "unknown key" in str(e.value)


def test_plus_on_a_key_the_recipe_already_sets(compose):
    # Hydra alone refuses `+` on an existing key; in a map field it just sets it.
    cfg = compose("+sweep.dataset_paths.mtbench=/data/q.jsonl")
    assert cfg.sweep.dataset_paths["mtbench"] == "/data/q.jsonl"


def test_a_map_entry_can_be_deleted(compose):
    cfg = compose("~sweep.dataset_paths.mtbench")
    assert "mtbench" not in cfg.sweep.dataset_paths


def test_where_hydra_truly_needs_plus_the_error_says_so(recipe_env):
    """An override that reaches Hydra unopened (here: composed without the opening
    step) gets Hydra's own "To append to your config use +" turned into our fix."""
    from hydra import compose as hydra_compose, initialize_config_dir

    from launcher.login.config.compose import _register, recipes_dir, translate_error

    _register()
    key = "bench.gates.min_acceptance_length.mtbench"
    with pytest.raises(Exception) as raw:
        with initialize_config_dir(config_dir=str(recipes_dir()), version_base=None, job_name="t"):
            hydra_compose(config_name="config", overrides=[f"{key}=2.0"])
    err = translate_error(raw.value)
    assert err.field == key
    assert f"add a key with +{key}=" in err.line() and "spelling" not in err.line()
