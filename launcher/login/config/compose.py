"""Compose a recipe from the YAML tree in recipes/ with Hydra, onto the schema.

Errors from Hydra/OmegaConf are turned into one-line ConfigErrors that name the
field and the fix.
"""
from __future__ import annotations

import dataclasses
import os
import re
import typing
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from launcher.login.config.schema import LauncherConfig
from launcher.login.errors import ConfigError
from launcher.runtime.files import REPO_ROOT

GROUPS = ("recipe", "model", "draft", "parallel", "cluster", "sweep", "topology")


def recipes_dir() -> Path:
    return Path(os.environ.get("SPECDEC_RECIPES_DIR", REPO_ROOT / "recipes")).resolve()


def specdec_home() -> str:
    """Where the heavy tool venvs and the tiny models live (see common/setup/install.sh)."""
    return os.environ.get("SPECDEC_HOME") or str(Path.home() / ".cache" / "specdec-launcher")


def _register() -> None:
    ConfigStore.instance().store(name="launcher_schema", node=LauncherConfig)
    if not OmegaConf.has_resolver("specdec_home"):
        OmegaConf.register_new_resolver("specdec_home", specdec_home)
    if not OmegaConf.has_resolver("engine_image"):  # recipes/engine/*.yaml: an image only where containers run
        OmegaConf.register_new_resolver("engine_image", lambda in_container, image: image if in_container else None)
    if not OmegaConf.has_resolver("repo_root"):
        OmegaConf.register_new_resolver("repo_root", lambda: str(REPO_ROOT))


def available(group: str) -> list[str]:
    d = recipes_dir() / group
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def map_fields(schema: type = LauncherConfig, prefix: str = "") -> set[str]:
    """Dotted paths of the schema's map-valued fields (dict[str, ...]): per-dataset
    gates, dataset paths, server env, extra sampling keys, draft.extra, ..."""
    out: set[str] = set()
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        t = hints[f.name]
        path = f"{prefix}{f.name}"
        if typing.get_origin(t) is dict:
            out.add(path)
        elif dataclasses.is_dataclass(t):
            out |= map_fields(t, path + ".")
    return out


# An override's key: everything before the first `=`, after Hydra's `+`/`++` prefix
# (Hydra keys may hold `-`, `$`, `/` and `@`, so no narrower pattern).
_OVERRIDE_KEY = re.compile(r"^(?P<plus>\+{0,2})(?P<key>[^=~+][^=]*)=")


def map_field_of(key: str, maps: set[str] | None = None) -> str | None:
    """The map field that `key` is, or lies inside (None for fixed-schema keys)."""
    maps = map_fields() if maps is None else maps
    for f in maps:
        if key == f or key.startswith(f + "."):
            return f
    return None


def open_map_overrides(overrides: list[str], maps: set[str] | None = None) -> list[str]:
    """Let `bench.gates.min_acceptance_length.mtbench=2.0` (a new key of a map field)
    and `bench.gates.min_acceptance_length={mtbench:2.0}` work as written, without
    Hydra's `+`: such overrides, and `+` ones (which Hydra would refuse where the
    recipe already sets the key), become `++` (add or override). Keys of
    fixed-schema fields are left alone, so a misspelt field is still an error."""
    maps = map_fields() if maps is None else maps
    out = []
    for o in overrides:
        m = _OVERRIDE_KEY.match(o)
        if m and m.group("plus") != "++" and map_field_of(m.group("key").strip(), maps):
            o = "++" + o[len(m.group("plus")):]
        out.append(o)
    return out


def _first_unknown(key: str) -> tuple[str, str, list[str]]:
    """(the key up to its first part the schema lacks, that part's parent, the
    parent's field names); the fields are [] where the schema holds no dataclass."""
    node: object = LauncherConfig
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not dataclasses.is_dataclass(node):
            break
        names = [f.name for f in dataclasses.fields(node)]
        if part not in names:
            parent = ".".join(parts[:i]) or "the recipe"
            return ".".join(parts[: i + 1]), parent, names
        node = typing.get_type_hints(node).get(part)
    return key, "", []


def _unknown_key(key: str) -> ConfigError:
    """A key the schema lacks: a new entry of a map field needs Hydra's `+` (when it
    came in a form we could not open); any other is a misspelling, named at its
    first wrong part with the fields that part could be."""
    if map_field_of(key):
        return ConfigError(key, "is a new key of a map field", f"add a key with +{key}=VALUE")
    wrong, parent, fields = _first_unknown(key)
    known = f"; fields of {parent}: {', '.join(fields)}" if fields else ""
    return ConfigError(wrong, "unknown key",
                       f"check the spelling{known}; `python -m launcher --cfg` shows every key")


def compose_recipe(overrides: list[str]) -> LauncherConfig:
    """Compose recipes/config.yaml with the overrides; return the typed, resolved config."""
    _register()
    try:
        with initialize_config_dir(config_dir=str(recipes_dir()), version_base=None, job_name="launcher"):
            cfg = compose(config_name="config", overrides=open_map_overrides(list(overrides)))
        # Re-merge onto the bare schema: keys added with `+key=...` are rejected too.
        cfg = OmegaConf.merge(OmegaConf.structured(LauncherConfig), OmegaConf.to_container(cfg))
        obj = OmegaConf.to_object(cfg)
    except (HydraException, OmegaConfBaseException) as e:
        raise translate_error(e) from None
    assert isinstance(obj, LauncherConfig)
    return obj


def _omegaconf_cause(e: BaseException) -> OmegaConfBaseException | None:
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OmegaConfBaseException):
            return e
        e = e.__cause__ or e.__context__
    return None


def translate_error(e: BaseException) -> ConfigError:
    """Turn a Hydra/OmegaConf composition error into a one-line ConfigError."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    m = re.search(r"Could not find '([^/']+)/([^']+)'", text) or re.search(
        r"In '[^']*': Could not find '([^/']+)/([^']+)'", text)
    if m:
        group, choice = m.group(1), m.group(2)
        opts = ", ".join(available(group)) or "(none)"
        return ConfigError(group, f"unknown {group} '{choice}'", f"choose one of: {opts}")
    m = re.search(r"Could not override '([^']+)'", text)
    if m and "No match in the defaults list" not in text:
        key = m.group(1)
        cause = _omegaconf_cause(e)
        if cause is not None and "not in struct" not in str(cause) and "Key '" not in str(cause):
            return _from_omegaconf(cause, key)
        return _unknown_key(key)
    m = re.search(r"Could not append to config\. An item is already at '([^']+)'", text)
    if m:
        key = m.group(1)
        return ConfigError(key, "is already set by the recipe, so `+` (add) refuses it",
                           f"drop the +: {key}=VALUE sets it")
    m = re.search(r"Could not delete from config\. '([^']+)' does not exist", text)
    if m:
        key = m.group(1)
        return ConfigError(key, "is not set, so `~` has nothing to delete",
                           f"check the spelling, or drop ~{key}")
    m = re.search(r"^(\w+) appears more than once in the final defaults list", text)
    if m:
        return ConfigError(m.group(1), "is chosen twice", f"drop the +: write {m.group(1)}=NAME")
    m = re.search(r"Could not (?:override|append to|delete).*'([^']+)'", text)
    if m:
        key = m.group(1)
        return ConfigError(key, "unknown config group or key", f"groups are: {', '.join(GROUPS)}")
    if "Error parsing override" in text or type(e).__name__ == "OverrideParseException":
        return ConfigError("override", first, "write overrides as key=value, lists as key=[1,8,32]")
    cause = _omegaconf_cause(e)
    if cause is not None:
        return _from_omegaconf(cause, None)
    return ConfigError("recipe", first, None)


def _from_omegaconf(cause: OmegaConfBaseException, key: str | None) -> ConfigError:
    full_key = getattr(cause, "full_key", None) or key or "recipe"
    msg = getattr(cause, "msg", None) or str(cause)
    msg = msg.strip().splitlines()[0]
    if "missing mandatory value" in msg.lower():
        return ConfigError(full_key, "is required but not set", f"set it, e.g. {full_key}=...")
    if "is not Optional" in msg:
        return ConfigError(full_key, "cannot be null", f"give {full_key} a value")
    m = re.search(r"Key '([^']+)' not in '([^']+)'", msg)
    if m:
        parent = full_key.rsplit(".", 1)[0] if "." in full_key else ""
        field = f"{parent}.{m.group(1)}" if parent and not full_key.endswith(m.group(1)) else full_key
        return _unknown_key(field)
    if "does not support deletion" in msg:
        return ConfigError(full_key, "is a field of the schema and cannot be deleted",
                           f"set it instead: {full_key}=VALUE")
    m = re.search(r"Value '([^']*)' (?:of type '[^']+' )?could not be converted to (\w+)", msg)
    if m:
        kind = m.group(2).lower()
        article = "an" if kind[0] in "aeiou" else "a"
        return ConfigError(full_key, f"'{m.group(1)}' is not {article} {kind}", f"give {full_key} {article} {kind} value")
    m = re.search(r"Value '([^']*)' is not a valid bool", msg)
    if m:  # dry_run, render_only, wait, report, ...
        return ConfigError(full_key, f"'{m.group(1)}' is not a boolean", f"write {full_key}=true or {full_key}=false")
    if "is not a ListConfig" in msg:
        return ConfigError(full_key, "expects a list", f"write a list, e.g. {full_key}=[...]")
    return ConfigError(full_key, msg, None)
