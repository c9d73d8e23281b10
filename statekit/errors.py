"""The exception tree. Every message says what was checked and what to do.

StatekitError
├── ConfigError          bad adapter name, spec file, option, or missing dependency
│   └── SpecError        a digest spec that is malformed or disagrees with the live schema
│       └── CoverageError    a live column neither included nor excluded by the spec
├── ResetError           a reset strategy could not build or restore a world
├── ResetNeeded          step()/state() called before reset()
├── EnvironmentClosed    any call on an Environment after close()
├── ActionError          an action that is malformed, unknown, or fails its tool's schema
├── ReplayMissError      an outbound request that no cassette recorded
└── RemoteError          a statekit harness answered a client's call with an error
"""

from __future__ import annotations


class StatekitError(Exception):
    """Base of every error statekit raises on purpose."""


class ConfigError(StatekitError):
    """Configuration is wrong: unknown adapter, bad option, missing optional dependency."""


class SpecError(ConfigError):
    """A digest spec is malformed or names a table or column the schema lacks."""


class CoverageError(SpecError):
    """Live columns that the digest spec neither includes nor excludes."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = sorted(missing)
        names = ", ".join(self.missing)
        super().__init__(
            f"digest spec does not cover {len(self.missing)} column(s): {names}. "
            "Add each to the table's `include` list, or to `exclude` with a reason."
        )


class ResetError(StatekitError):
    """A reset strategy failed; whatever it had created was dropped."""


class ResetNeeded(StatekitError):
    """The environment has no episode yet: call reset(seed=...) first."""


class EnvironmentClosed(StatekitError):
    """The environment was closed; it holds no strategy or server any more, so it creates nothing."""


class ActionError(StatekitError):
    """An action is malformed, names an unknown tool, or fails the tool's input schema."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class ReplayMissError(StatekitError):
    """An outbound request that no cassette recorded; no packet left the process."""


class RemoteError(StatekitError):
    """A harness (``statekit serve``) answered with an error; ``status`` and ``code`` say which."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        super().__init__(f"{message} (HTTP {status}, {code})" if status else f"{message} ({code})")
