"""What a team accepts, and the judgement of a licence expression against it.

A policy is a TOML file (``default_policy.toml`` documents every key). Licences are judged one
symbol at a time: the policy's own ``accept``/``reject`` lists first, then the licence's ScanCode
category. A symbol with neither is unknown. Expressions combine symbols in three-valued logic
(Kleene): ``A OR B`` is yes if either is, ``A AND B`` is no if either is, and unknown otherwise.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statekit.assay import spdx
from statekit.assay.report import Component, Shipped, Verdict
from statekit.errors import ConfigError

DEFAULT = Path(__file__).with_name("default_policy.toml")
FORMAT = 1
_KEYS: dict[str, dict[str, type]] = {
    "licences": {"accept_categories": list, "reject_categories": list, "accept": list, "reject": list},
    "debian": {"trust_main": bool},
    "fixtures": {"accept_synthetic": bool, "accept_sources": list},
    "cassettes": {"phone_regions": list},
}
_CLARIFY_KEYS = {"component": str, "version": str, "licence": str, "reason": str}


@dataclass(frozen=True)
class Clarification:
    """A person's reading of a licence the metadata does not state (or states wrongly)."""

    licence: str
    reason: str
    version: str = ""


@dataclass(frozen=True)
class Policy:
    source: str
    accept_categories: frozenset[str]
    reject_categories: frozenset[str]
    accept: frozenset[str]
    reject: frozenset[str]
    trust_debian_main: bool
    accept_synthetic: bool
    accept_sources: frozenset[str]
    phone_regions: tuple[str, ...]
    clarify: dict[str, Clarification] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None = None) -> Policy:
        """The default policy, with the tables of the team's file at ``path`` laid over it."""
        merged = _read(DEFAULT)
        clarify: list[Any] = []
        source = "default"
        if path is not None:
            team = _read(Path(path))
            for table, values in team.items():
                if table == "clarify":
                    clarify = values
                elif table != "format":
                    merged[table].update(values)
            source = Path(path).name
        return cls(
            source=source,
            accept_categories=frozenset(merged["licences"]["accept_categories"]),
            reject_categories=frozenset(merged["licences"]["reject_categories"]),
            accept=frozenset(k.lower() for k in merged["licences"]["accept"]),
            reject=frozenset(k.lower() for k in merged["licences"]["reject"]),
            trust_debian_main=merged["debian"]["trust_main"],
            accept_synthetic=merged["fixtures"]["accept_synthetic"],
            accept_sources=frozenset(merged["fixtures"]["accept_sources"]),
            phone_regions=tuple(merged["cassettes"]["phone_regions"]),
            clarify=_clarifications(clarify, path),
        )

    def symbol(self, key: str) -> bool | None:
        """One licence: accepted (True), rejected (False), or unknown (None)."""
        if key.lower() in self.reject:
            return False
        if key.lower() in self.accept:
            return True
        found = spdx.category(key)
        if found in self.reject_categories:
            return False
        if found in self.accept_categories:
            return True
        return None

    def evaluate(self, expression: Any) -> bool | None:
        """A parsed expression in Kleene's three-valued logic."""
        lic = spdx.licensing()
        if isinstance(expression, lic.AND | lic.OR):
            values = [self.evaluate(arg) for arg in expression.args]
            if isinstance(expression, lic.AND):
                return False if False in values else True if all(values) else None
            return True if True in values else False if all(v is False for v in values) else None
        return self.symbol(getattr(expression, "license_symbol", expression).key)

    def judge(self, item: Shipped) -> Component:
        """The component with this policy's verdict on its licence, and the reason in words."""
        licence, evidence = item.licence, item.evidence
        clarified = self.clarify.get(f"{item.kind}:{item.name}".lower())
        if clarified and clarified.version in ("", item.version):
            licence, evidence = clarified.licence, f"policy clarification: {clarified.reason}"

        def component(verdict: Verdict, reason: str, categories: tuple[str, ...] = ()) -> Component:
            return Component(
                item.kind, item.name, item.version, licence, evidence, verdict, reason, categories
            )

        parsed = spdx.parse(licence) if licence else None
        if parsed is None:
            what = "states no licence" if not licence else f"has a licence that does not parse: {licence!r}"
            if item.debian_main and self.trust_debian_main:
                return component("yes", f"{what}; accepted as a package of Debian main (DFSG-free)")
            return component("unknown", f"{what}; read its licence and add a [[clarify]] entry to the policy")
        keys = spdx.symbols(parsed)
        categories = tuple(sorted({spdx.category(k) or "unknown" for k in keys}))
        verdict = self.evaluate(parsed)
        rejected = [k for k in keys if self.symbol(k) is False]
        unknown = [k for k in keys if self.symbol(k) is None]
        if verdict is True:
            return component("yes", ", ".join(categories), categories)
        if verdict is False:
            named = ", ".join(f"{k} ({spdx.category(k) or 'listed in reject'})" for k in rejected)
            return component("no", f"the policy rejects {named}", categories)
        if item.debian_main and self.trust_debian_main:
            return component(
                "yes",
                f"{', '.join(unknown)}: no SPDX id; accepted as a package of Debian main (DFSG-free)",
                categories,
            )
        return component(
            "unknown",
            f"{', '.join(unknown)}: no SPDX id or category the policy accepts; "
            "read the licence and add it to the policy's accept list or a [[clarify]] entry",
            categories,
        )

    def accepts_source(self, name: str) -> bool:
        return name in self.accept_sources


def _read(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"policy file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"policy file {path} is not valid TOML: {exc}") from exc
    if data.get("format", FORMAT) != FORMAT:
        raise ConfigError(f"policy file {path} has format {data['format']!r}; this statekit reads {FORMAT}")
    for table, values in data.items():
        if table in ("format", "clarify"):
            continue
        if table not in _KEYS or not isinstance(values, dict):
            raise ConfigError(f"policy file {path}: unknown table [{table}]; tables are {sorted(_KEYS)}")
        for key, value in values.items():
            expected = _KEYS[table].get(key)
            if expected is None:
                raise ConfigError(
                    f"policy file {path}: [{table}] has no key {key!r}; keys are {sorted(_KEYS[table])}"
                )
            if not isinstance(value, expected):
                raise ConfigError(f"policy file {path}: [{table}] {key} must be a {expected.__name__}")
    return data


def _clarifications(entries: Any, path: str | Path | None) -> dict[str, Clarification]:
    if not isinstance(entries, list):
        raise ConfigError(f"policy file {path}: clarify must be an array of tables ([[clarify]])")
    found: dict[str, Clarification] = {}
    for entry in entries:
        if (
            not isinstance(entry, dict)
            or set(entry) - set(_CLARIFY_KEYS)
            or not {
                "component",
                "licence",
                "reason",
            }
            <= set(entry)
        ):
            raise ConfigError(
                f"policy file {path}: each [[clarify]] needs component, licence and reason "
                f"(and may have version); got {entry!r}"
            )
        if spdx.parse(entry["licence"]) is None:
            raise ConfigError(f"policy file {path}: clarify licence {entry['licence']!r} does not parse")
        found[entry["component"].lower()] = Clarification(
            entry["licence"], entry["reason"], str(entry.get("version", ""))
        )
    return found
