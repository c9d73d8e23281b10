"""The program that runs inside the sandbox, next to the model's code. Standard library only.

It starts fresh for every test run with one job in ``argv[1]`` (``marshal``-ed plain data, in hex:
written by the host, so trusted; ``marshal`` is built in, which keeps start-up to a minimum):

- ``{"mode": "visible"}``: import each ``test_*.py`` of the working directory and call its ``test_*``
  functions; the report goes to stdout, which the agent sees. Nothing about this run is trusted.
- ``{"mode": "hidden", "module": M, "cases": [[step, ...], ...]}``: import module ``M`` and make the
  calls the hidden cases describe. Only the *inputs* come in (expected values never enter the sandbox);
  one record per call goes out on file descriptor 3 (a ``repr`` of plain data, one per line, which
  the host reads with ``ast.literal_eval``: never executed), carrying the value the call returned,
  encoded by exact type (``encode``), or the builtin exception classes it raised and its message.

The runner never judges anything. Every line of this process, this file included, can be rewritten by
the model's code, so its records are only the model's *answers*; the verdict is computed by
``statekit_examples.adapters.code_env.grader`` in the adapter's own process, against expectations this
process never sees. The host imports this module for ``encode``/``decode`` so both sides share one
wire format.

Every job also carries ``now`` and ``seed``: the episode's virtual time and a seed drawn from its
seeded random stream. ``time.time``, ``datetime.now`` and friends read ``now`` (frozen, like the
host's virtual clock), and ``random`` and ``os.urandom`` (so ``uuid4`` too) are seeded (``secrets`` and
``random.SystemRandom`` keep the kernel's randomness, as their names promise),
so a run's output is a function of the episode's seed, not of the wall clock. ``time.monotonic`` and
sleeping stay real (timeouts need them).

Start-up is paid on every run, so the runner imports only what it needs (no ``json``, ``uuid`` or
``typing``; ``traceback`` only when a test fails) and the sandboxes run it precompiled, with ``-S``.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import importlib
import marshal
import os
import random
import resource
import sys
import time

TYPE_CHECKING = False  # importing typing would cost start-up; the checkers read the name alone
if TYPE_CHECKING:
    from typing import Any

WORK_DIR = "/tmp/work"
"""Where the sandbox mounts the episode's working directory (read-only), in both sandbox layers."""
RUNNER_PATH = "/opt/statekit/runner.py"
"""The runner's file name in tracebacks (and its real place in the container image)."""
PYTHON_FLAGS = ("-B", "-s", "-S", "-P")
"""No bytecode writes, no user or system site-packages (the tasks need the standard library only, and
``site`` costs start-up), no script directory on ``sys.path``."""
RECORDS_FD = 3
MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_RECORD_BYTES = 256 * 1024
MAX_MESSAGE_CHARS = 1000

# -- the wire format ----------------------------------------------------------------------------------
# A value is a list whose first item names its exact type: ["int", "5"], ["float", "2.5"],
# ["str", "a"], ["bool", true], ["none"], ["bytes", "6162"], ["list", [...]], ["tuple", [...]],
# ["dict", [[key, value], ...]], ["set", [...]], ["frozenset", [...]]; anything else (a subclass, an
# object with a clever __eq__) is ["unsupported", "module.Class"] and equals nothing.


class _TooLarge(Exception):
    pass


def _canonical(tagged: Any) -> str:
    """A sort key for tagged values: their repr (lists, strs, bools and None only, so it is stable)."""
    return repr(tagged)


def encode(value: Any) -> list[Any]:
    """``value`` as tagged plain data, by exact type (``type(v) is int``, never ``isinstance``)."""
    budget = [MAX_NODES]
    try:
        return _encode(value, budget, 0)
    except _TooLarge:
        return ["unsupported", "too large or too deep"]


def _encode(value: Any, budget: list[int], depth: int) -> list[Any]:
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise _TooLarge
    kind = type(value)
    if value is None:
        return ["none"]
    if kind is bool:
        return ["bool", value]
    if kind is int:
        try:
            return ["int", str(value)]
        except ValueError:  # more digits than int-to-str allows
            raise _TooLarge from None
    if kind is float:
        return ["float", repr(value)]
    if kind is str:
        return ["str", value]
    if kind is bytes:
        return ["bytes", value.hex()]
    if kind is list or kind is tuple:
        return [kind.__name__, [_encode(item, budget, depth + 1) for item in value]]
    if kind is dict:
        pairs = [[_encode(k, budget, depth + 1), _encode(v, budget, depth + 1)] for k, v in value.items()]
        pairs.sort(key=lambda pair: _canonical(pair[0]))
        return ["dict", pairs]
    if kind is set or kind is frozenset:
        items = [_encode(item, budget, depth + 1) for item in value]
        items.sort(key=_canonical)
        return [kind.__name__, items]
    return ["unsupported", f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', '?')}"]


_SCALARS = {"int": int, "str": str}


def decode(tagged: Any) -> Any:
    """The inverse of ``encode`` for the supported types (hidden-case inputs travel this way)."""
    if not isinstance(tagged, list) or not tagged or not isinstance(tagged[0], str):
        raise ValueError(f"not a tagged value: {tagged!r}")
    tag, rest = tagged[0], tagged[1:]
    if tag == "none":
        return None
    if tag in ("bool", "str"):
        return rest[0]
    if tag == "int":
        return int(rest[0])
    if tag == "float":
        return float(rest[0])
    if tag == "bytes":
        return bytes.fromhex(rest[0])
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [decode(item) for item in rest[0]]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in rest[0]}
    raise ValueError(f"cannot decode a value tagged {tag!r}")


# -- determinism inside the sandbox -------------------------------------------------------------------
_NOW = [0.0]


def install_clock(now: float) -> None:
    """Make Python's wall clock read ``_NOW`` (frozen): ``time.time``, ``datetime.now``, ``date.today``.

    C code that asks the kernel directly (file timestamps, a subprocess's clock) still sees real time.
    """
    _NOW[0] = now
    real_localtime, real_gmtime, real_ctime = time.localtime, time.gmtime, time.ctime
    real_strftime, real_asctime = time.strftime, time.asctime
    time.time = lambda: _NOW[0]
    time.time_ns = lambda: int(_NOW[0] * 1_000_000_000)
    time.localtime = lambda secs=None: real_localtime(_NOW[0] if secs is None else secs)
    time.gmtime = lambda secs=None: real_gmtime(_NOW[0] if secs is None else secs)
    time.ctime = lambda secs=None: real_ctime(_NOW[0] if secs is None else secs)
    time.asctime = lambda t=None: real_asctime(real_localtime(_NOW[0]) if t is None else t)
    time.strftime = lambda fmt, t=None: real_strftime(fmt, real_localtime(_NOW[0]) if t is None else t)

    class datetime(_dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return cls.fromtimestamp(_NOW[0], tz)

        @classmethod
        def today(cls) -> Any:
            return cls.fromtimestamp(_NOW[0])

        @classmethod
        def utcnow(cls) -> Any:
            return cls.fromtimestamp(_NOW[0], _dt.UTC).replace(tzinfo=None)

    class date(_dt.date):
        @classmethod
        def today(cls) -> Any:
            return cls.fromtimestamp(_NOW[0])

    for cls in (datetime, date):
        cls.__module__ = "datetime"
    _dt.datetime, _dt.date = datetime, date  # type: ignore[misc]


def seed_randomness(seed: int) -> None:
    """``random`` draws from ``seed``, and ``os.urandom`` (behind ``uuid4``, ``secrets``) from a second
    stream of it, so drawing an id does not shift ``random``'s sequence."""
    random.seed(seed)
    os.urandom = random.Random(seed ^ 0x5EED).randbytes


_LIMITS = {
    "cpu_seconds": resource.RLIMIT_CPU,
    "memory_bytes": resource.RLIMIT_AS,
    "file_bytes": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
}


def apply_limits(limits: dict[str, int]) -> None:
    """Lower this process's resource limits (the container layer; the process layer set them already),
    and make it and its children the first the kernel's OOM killer picks, before the sandbox's own
    processes (a container's init, the launcher): a run out of memory loses itself, not the sandbox."""
    for name, value in sorted(limits.items()):
        which = _LIMITS.get(name)
        if which is None:
            continue
        _, hard = resource.getrlimit(which)
        if hard == resource.RLIM_INFINITY or value < hard:
            resource.setrlimit(which, (value, value))
    try:
        with open("/proc/self/oom_score_adj", "w") as adj:  # raising it needs no privilege
            adj.write("1000")
    except OSError:
        pass


# -- the two modes ------------------------------------------------------------------------------------
def _format_failure(exc: BaseException) -> str:
    """The exception and the frames of the model's own files (the runner's frames are noise)."""
    import traceback  # only when something failed: every import costs start-up time

    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename.startswith(WORK_DIR + "/") or frame.filename.startswith("./")
    ]
    lines = traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


def run_visible() -> int:
    """Run each ``test_*`` function of each ``test_*.py``; exit 0 only if some ran and all passed."""
    passed = failed = 0
    for filename in sorted(os.listdir(".")):
        if not (filename.startswith("test_") and filename.endswith(".py")):
            continue
        try:
            module = importlib.import_module(filename[:-3])
        except BaseException as exc:
            print(f"ERROR {filename}: could not import it\n{_format_failure(exc)}", flush=True)
            failed += 1
            continue
        for name, test in list(vars(module).items()):
            if not (name.startswith("test_") and callable(test)):
                continue
            try:
                test()
            except BaseException as exc:
                print(f"FAIL {filename}::{name}\n{_format_failure(exc)}", flush=True)
                failed += 1
            else:
                print(f"PASS {filename}::{name}", flush=True)
                passed += 1
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if passed and not failed else 1


def _emit(record: dict[str, Any]) -> None:
    line = repr(record)  # one line: a str's repr escapes newlines
    if len(line) > MAX_RECORD_BYTES:
        record = {**record, "value": ["unsupported", "too large"]}
        line = repr(record)
    data = (line + "\n").encode()
    while data:
        data = data[os.write(RECORDS_FD, data) :]


def _builtin_classes(exc: BaseException) -> list[str]:
    """The builtin exception classes ``exc`` is an instance of, nearest first (a home-made class is
    none of them, whatever it calls itself; the grader holds the first to the expected class)."""
    return [cls.__name__ for cls in type(exc).__mro__ if getattr(builtins, cls.__name__, None) is cls]


def _message(exc: BaseException) -> str:
    """``str(exc)``, cut to ``MAX_MESSAGE_CHARS`` ("" when the model's ``__str__`` fails)."""
    try:
        text = str(exc)
    except BaseException:
        return ""
    return text[:MAX_MESSAGE_CHARS] if type(text) is str else ""


def _resolve(module: Any, names: dict[str, Any], call: str) -> Any:
    head, _, attribute = call.partition(".")
    target = names[head] if head in names else getattr(module, head)
    return getattr(target, attribute) if attribute else target


def run_hidden(module_name: str, cases: list[list[dict[str, Any]]], variants: list[str]) -> int:
    """Make each case's calls in order; stop a case at its first exception (later steps depend on it).

    With ``variants`` (subdirectories of the working directory, validation only), the same cases run
    against each variant's copy of the module in turn, and every record names its variant.
    """
    base = os.getcwd()
    for number, folder in enumerate(variants or [""]):
        tag = {"variant": number} if variants else {}
        _forget_modules_under(base)
        sys.path[0] = os.path.join(base, folder) if folder else base
        now = _NOW[0]
        try:
            module = importlib.import_module(module_name)
        except BaseException as exc:
            _emit({**tag, "import_error": _builtin_classes(exc)})
            continue
        for case_index, steps in enumerate(cases):
            _NOW[0] = now
            names: dict[str, Any] = {}
            for step_index, step in enumerate(steps):
                where = {**tag, "case": case_index, "step": step_index}
                try:
                    if "at" in step:
                        _NOW[0] = float(step["at"])
                    if "seed" in step:
                        seed_randomness(int(step["seed"]))
                    target = _resolve(module, names, step["call"])
                    args = [decode(arg) for arg in step.get("args", [])]
                    kwargs = {key: decode(value) for key, value in step.get("kwargs", {}).items()}
                    result = target(*args, **kwargs)
                except BaseException as exc:
                    _emit({**where, "raised": _builtin_classes(exc), "message": _message(exc)})
                    break
                if "as" in step:
                    names[step["as"]] = result
                _emit({**where, "value": encode(result)})
    return 0


def _forget_modules_under(folder: str) -> None:
    """Drop modules loaded from the working directory, so the next variant imports its own copies."""
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(folder + "/"):
            del sys.modules[name]


def main(argv: list[str]) -> int:
    job = marshal.loads(bytes.fromhex(argv[-1]))
    apply_limits(job.get("limits", {}))
    install_clock(float(job["now"]))
    seed_randomness(int(job["seed"]))
    sys.path.insert(0, os.getcwd())
    if job["mode"] == "visible":
        return run_visible()
    return run_hidden(job["module"], job["cases"], job.get("variants", []))


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.exit(code)
