"""A run's identity, typed: what a job measured and with which server (issue 52).

model, draft, method, k and the forced acceptance; the engine and its version; and the serving
configuration: every server flag that shapes serving (all but ports, hosts, paths and keys;
the model and draft paths are fields of their own), with the speculative config's other keys,
and a short fingerprint of both. The planner fills it once into the job spec
(``JobSpec.run_identity``); the benchmark writes it into summary.json and each point's
configuration.json; launcher.results.identity is its one reader (with the fallback for results
written before it). Two configurations with different fingerprints are never pooled, and
:meth:`RunIdentity.differences` names what differs ("+ --async-scheduling").

Pure, standard library and launcher.engines only.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from typing import Iterable, Mapping, Optional

from launcher.engines.flags import SPECULATIVE_CONFIG_FLAG, flag_settings
from launcher.engines.forced_acceptance import LENGTH_KEY, METHOD_KEY, RATES_KEY

__all__ = ["SPECULATIVE_CONFIG_FLAG", "RunIdentity", "build", "configuration_labels", "serving_settings",
           "settings_diff"]  # SPECULATIVE_CONFIG_FLAG: serving_settings keeps it under its own key
# A flag whose name ends in one of these words says where the server listens, what it reads or
# which secret it holds: not how it serves (--port, --host, --dist-init-addr, --api-key, --hf-token, --download-dir).
_NOT_SERVING_WORDS = ("port", "host", "hosts", "addr", "address", "url", "key", "keyfile", "certfile", "token",
                      "secret", "password", "path", "dir", "file")
_NOT_SERVING_FLAGS = ("--model", "--tokenizer", "--chat-template", "--ssl-ca-certs")
_PATH_STARTS = ("/", "./", "../", "~/")
# The speculative config's keys that are identity fields of their own (k, draft, method, forced level).
_OWN_FIELDS = ("method", "model", "num_speculative_tokens", METHOD_KEY, LENGTH_KEY, RATES_KEY)


def _shapes_serving(flag: str, value: str) -> bool:
    if flag in _NOT_SERVING_FLAGS or flag.rsplit("-", 1)[-1] in _NOT_SERVING_WORDS:
        return False
    return not value.startswith(_PATH_STARTS)


def serving_settings(argv: Iterable[str]) -> dict[str, str]:
    """The settings of a server argv (or its flags) that shape serving: flag -> value ("" for a
    bare flag), without ports, hosts, paths and keys. The speculative config stays, under
    ``SPECULATIVE_CONFIG_FLAG``, so a caller comparing a server with its baseline can drop it."""
    return {f: v for f, v in sorted(flag_settings(list(argv)).items()) if _shapes_serving(f, v)}


def _setting(flag: str, value: str) -> str:
    return f"{flag} {value}".strip()


def settings_diff(a: Mapping[str, str], b: Mapping[str, str], ignore: Iterable[str] = ()) -> list[str]:
    """What ``b`` sets differently from ``a``, one short label each, by flag name:
    "+ --async-scheduling" (only in b), "- --enable-prefix-caching" (only in a),
    "--max-num-seqs 64→128" (both, different values). ``ignore``: flags left out."""
    skip = set(ignore)
    out = []
    for flag in sorted((set(a) | set(b)) - skip):
        if flag not in a:
            out.append("+ " + _setting(flag, b[flag]))
        elif flag not in b:
            out.append("- " + _setting(flag, a[flag]))
        elif a[flag] != b[flag]:
            out.append(f"{flag} {a[flag] or '(set)'}→{b[flag] or '(set)'}")
    return out


SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"  # vLLM's k per batch size: a k, not a setting


def _fingerprint(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class RunIdentity:
    """What a run measured and with which server (see the module doc). ``serving``: the server's
    settings (serving_settings, without the speculative config); ``speculation``: the speculative
    config's keys that are no field of their own (a draft's TP, a k schedule)."""
    model: str
    draft: str = ""                 # the draft checkpoint ("" without one: no speculation, n-gram)
    method: str = "none"
    k: Optional[int] = 0            # speculative tokens (0 without speculation; None when not recorded)
    forced: Optional[dict] = None   # {"length": 3.5} or {"rates": [...]}; None: the draft earned its acceptance
    engine: str = ""
    engine_version: str = ""        # "" when not known
    serving: Mapping[str, str] = field(default_factory=dict)
    speculation: Mapping[str, object] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """8 hex digits of the serving configuration (serving settings and the other speculative
        keys): equal for two runs of one configuration, whatever their k (or k schedule: a k per
        batch size), forced level or version."""
        return _fingerprint({"serving": dict(self.serving), "speculation": self._settings()})

    def _settings(self) -> dict:
        """The speculative keys that make a configuration: all but the k schedule (k's own kind)."""
        return {k: v for k, v in self.speculation.items() if k != SCHEDULE_KEY}

    @property
    def configuration(self) -> tuple:
        """What must be equal for two runs to be pooled, k and forced level aside."""
        return self.model, self.draft, self.method, self.fingerprint

    @property
    def schedule(self) -> Optional[list]:
        """A dynamic k schedule (vLLM's num_speculative_tokens_per_batch_size), None without one."""
        return self.speculation.get(SCHEDULE_KEY) or None

    def differences(self, other: "RunIdentity") -> list[str]:
        """What this run's server sets differently from ``other``'s, one short label each
        ("+ --async-scheduling", "--max-num-seqs 64→128", "speculative_config.draft_tensor_parallel_size 1→2")."""
        spec_a = {f"speculative_config.{k}": json.dumps(v) for k, v in other._settings().items()}
        spec_b = {f"speculative_config.{k}": json.dumps(v) for k, v in self._settings().items()}
        return settings_diff(other.serving, self.serving) + settings_diff(spec_a, spec_b)

    def with_engine_version(self, version: Optional[str]) -> "RunIdentity":
        """The identity with the engine version the node found, where the plan did not know it."""
        return self if self.engine_version or not version else replace(self, engine_version=str(version))

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["serving"], d["speculation"] = dict(self.serving), dict(self.speculation)
        return d | {"fingerprint": self.fingerprint}

    @classmethod
    def from_dict(cls, d: Mapping) -> "RunIdentity":
        """A recorded identity (to_dict's keys; the fingerprint is recomputed, not read)."""
        if not isinstance(d, Mapping) or not d.get("model"):
            raise ValueError("run identity: expected a JSON object with a model")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known - {"fingerprint"})
        if unknown:
            raise ValueError(f"run identity: unknown key(s) {unknown} (fix: a newer planner wrote it)")
        kw = {k: v for k, v in d.items() if k in known}
        kw["serving"] = {str(f): str(v) for f, v in dict(kw.get("serving") or {}).items()}
        kw["speculation"] = dict(kw.get("speculation") or {})
        return cls(**kw)


ENV_PREFIX = "env "  # a serving setting read from the server's environment: "env NAME" -> value


def build(*, model: str, method: str, speculative_config: Optional[Mapping], engine: str,
          engine_version: Optional[str], server_flags: Iterable[str], forced: Optional[Mapping] = None,
          measured_env: Optional[Mapping[str, str]] = None) -> RunIdentity:
    """A run's identity from what makes its server: the model, the speculative config (None
    without speculation), the engine and the server's flags without the speculative ones
    (JobSpec.server_flags; a speculative config flag among them is left out: the config says it).
    ``forced``: the forced acceptance where results recorded it beside a config without its keys.
    ``measured_env``: the server environment variables that change what is measured (the engine's
    ``measured_env``), serving settings of their own ("env NAME")."""
    settings = serving_settings(server_flags)
    settings.pop(SPECULATIVE_CONFIG_FLAG, None)
    settings.update({ENV_PREFIX + str(k): str(v) for k, v in sorted((measured_env or {}).items())})
    sc = dict(speculative_config or {})
    speculative = bool(sc) and sc.get("method") not in (None, "none")
    forced = ({"length": sc[LENGTH_KEY]} if sc.get(LENGTH_KEY) is not None else
              {"rates": list(sc[RATES_KEY])} if sc.get(RATES_KEY) is not None else dict(forced) if forced else None)
    k = sc.get("num_speculative_tokens")
    return RunIdentity(
        model=str(model), draft=str(sc.get("model") or "") if speculative else "",
        method=str(sc.get("method") or method or "none") if speculative else "none",
        k=(int(k) if isinstance(k, int) else None) if speculative else 0,
        forced=forced if speculative else None, engine=str(engine or ""), engine_version=str(engine_version or ""),
        serving=settings,
        speculation={key: v for key, v in sorted(sc.items()) if key not in _OWN_FIELDS
                     and not (isinstance(v, str) and v.startswith(_PATH_STARTS))} if speculative else {})


def configuration_labels(identities: Iterable[RunIdentity]) -> dict[tuple, str]:
    """For identities that share a folder: ``configuration`` -> a label naming what its server
    sets differently from the others of its model, draft and method ("" where it is the only
    configuration). The reference is the configuration with the fewest settings (then the lowest
    fingerprint); each other is labelled by what it changes ("+ --async-scheduling"), the
    reference by what the one other changes, undone ("- --async-scheduling"), or "reference"
    beside two or more others."""
    groups: dict[tuple, dict[str, RunIdentity]] = {}
    for i in identities:
        groups.setdefault(i.configuration[:3], {}).setdefault(i.fingerprint, i)
    out: dict[tuple, str] = {}
    for members in groups.values():
        if len(members) == 1:
            out.update({i.configuration: "" for i in members.values()})
            continue
        ref, *others = sorted(members.values(), key=lambda i: (len(i.serving) + len(i.speculation), i.fingerprint))
        for i in others:
            out[i.configuration] = ", ".join(i.differences(ref)) or f"configuration {i.fingerprint}"
        out[ref.configuration] = (", ".join(ref.differences(others[0])) if len(others) == 1 else "") \
            or f"reference configuration {ref.fingerprint}"
    return out
