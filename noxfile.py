"""Every check of the project is a nox session; CI runs the default ones.

The sessions share one virtualenv, ``.nox/workspace``, into which each syncs the
locked uv workspace (a no-op after the first), so a run checks exactly what
``uv.lock`` pins and nothing that happens to be installed, without building the
same environment once per session.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import nox
from packaging.requirements import Requirement

nox.needs_version = ">=2026.10.20"
nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "typecheck", "docs", "tests", "conformance", "packaging"]

ROOT = Path(__file__).parent
WORKSPACE_VENV = ROOT / ".nox" / "workspace"
# pytest-xdist for the long suites (the core's tests, every conformance run): their tests
# start private engines on free ports in private temp directories and mostly wait on
# Steps, so they run side by side. "--dist load" hands out single tests (the conformance
# suite is one class per runner, which "loadscope" would keep in one process). The short
# adapter suites and the local engine's (one long Dex SDK scenario run) stay serial: there
# each extra process costs more to start than it saves. DEX_AGENTS_TEST_PROCESSES sets the
# count; 0 or 1 runs everything serially (advisable on a machine already saturated by
# other work, where parallel runs measured no faster).
TEST_PROCESSES = int(os.environ.get("DEX_AGENTS_TEST_PROCESSES") or min(4, os.cpu_count() or 1))
PARALLEL_PACKAGE_TESTS = {"packages/core/tests"}


def parallel() -> list[str]:
    """The xdist options of a parallel pytest run (xdist off when TEST_PROCESSES < 2)."""
    if TEST_PROCESSES < 2:
        return ["-p", "no:xdist"]
    return ["-n", str(TEST_PROCESSES), "--dist", "load"]


def has_own_tests(tests_dir: Path) -> bool:
    """Whether ``tests_dir`` has tests besides conformance ones (the example adapter's
    are all conformance, which the ``conformance`` session runs)."""
    return any(
        not path.name.startswith("test_conformance") for path in tests_dir.rglob("test_*.py")
    )


PACKAGE_TESTS = sorted(
    str(path.relative_to(ROOT))
    for path in [
        *ROOT.glob("packages/*/tests"),
        ROOT / "tests-shared/tests",
        *ROOT.glob("examples/*/tests"),
    ]
    if has_own_tests(path)
)
# Each runner proves the session contract with the shared suite, one session each,
# so a failure names the runner. "core" is the scripted runner and Stepwise.
ADAPTERS = {
    "core": "packages/core",
    "pydantic-ai": "packages/pydantic-ai",
    "openai-agents": "packages/openai-agents",
    "langgraph": "packages/langgraph",
    "claude-sdk": "packages/claude-sdk",
    # The maintainer's guide's example adapter, also run from built wheels by `packaging`.
    "minimal-adapter": "examples/minimal-adapter",
}


def sync(session: nox.Session, *extra: str, venv: Path = WORKSPACE_VENV) -> None:
    """Install the whole locked workspace, all extras, the dev group and ``extra`` uv
    arguments into ``venv`` (the shared venv unless a session needs its own)."""
    session.run_install(
        "uv",
        "sync",
        "--locked",
        "--all-packages",
        "--all-extras",
        *extra,
        env={"UV_PROJECT_ENVIRONMENT": str(venv)},
        external=True,
    )


def run_tool(
    session: nox.Session, tool: str, *arguments: str, env: dict[str, str] | None = None
) -> None:
    """Run ``tool`` from the shared venv, with the venv first on PATH as if activated
    (and ``env`` added to the environment)."""
    scripts = WORKSPACE_VENV / "bin"
    environment = {
        "VIRTUAL_ENV": str(WORKSPACE_VENV),
        "PATH": os.pathsep.join([str(scripts), os.environ.get("PATH", "")]),
        **(env or {}),
    }
    session.run(str(scripts / tool), *arguments, env=environment, external=True)


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """ruff lint and format check over the whole tree, and each package's import contracts."""
    sync(session)
    run_tool(session, "ruff", "check", ".")
    run_tool(session, "ruff", "format", "--check", ".")
    # Each package declares its import layers in its own .importlinter file.
    contracts = sorted(
        str(path.relative_to(ROOT)) for path in ROOT.glob("packages/*/.importlinter")
    )
    if contracts:
        run_tool(session, "lint-imports", "--no-cache", *contracts)


@nox.session(venv_backend="none")
def typecheck(session: nox.Session) -> None:
    """pyright in strict mode over every package's src/."""
    sync(session)
    run_tool(session, "pyright", "--pythonpath", str(WORKSPACE_VENV / "bin" / "python"))


@nox.session(venv_backend="none")
def docs(session: nox.Session) -> None:
    """Build the documentation site (mkdocs.yml, docs/) with ``--strict``, offline.

    A warning fails the build: a broken link or anchor, a page missing from the nav, an API
    reference entry whose object or docstring does not resolve. The site goes to a temporary
    directory (``nox -s docs -- --site-dir site`` keeps it in the ignored ``site/``). The code
    blocks of the pages run as tests in the packages' ``test_readme_examples.py``.
    """
    sync(session)
    arguments = session.posargs or ["--site-dir", session.create_tmp()]
    # NO_MKDOCS_2_WARNING: material's end-of-life banner is not about this site.
    run_tool(session, "mkdocs", "build", "--strict", *arguments, env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Every package's own tests, against the real local engine (conformance runs apart).

    One pytest run per package, so each package's conftest and helper modules stay its own.
    """
    sync(session)
    for tests_dir in PACKAGE_TESTS:
        options = parallel() if tests_dir in PARALLEL_PACKAGE_TESTS else ["-p", "no:xdist"]
        run_tool(session, "pytest", "-m", "not conformance", *options, tests_dir, *session.posargs)


@nox.session(venv_backend="none")
@nox.parametrize("adapter", list(ADAPTERS))
def conformance(session: nox.Session, adapter: str) -> None:
    """The shared conformance suite against one runner."""
    tests_dir = ROOT / ADAPTERS[adapter] / "tests"
    if not any(tests_dir.glob("test_conformance*.py")):
        session.skip(f"{adapter} has no conformance tests yet")
    sync(session)
    run_tool(
        session,
        "pytest",
        "-m",
        "conformance",
        *parallel(),
        str(tests_dir.relative_to(ROOT)),
        *session.posargs,
    )


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Run every benchmark script; each prints its figures (not part of the default run)."""
    sync(session, "--group", "bench")  # DBOS, the engine benchmark's comparison
    scripts = sorted(p for p in ROOT.glob("benchmarks/*.py") if not p.name.startswith("_"))
    if not scripts:
        session.skip("no benchmark scripts yet")
    for script in scripts:
        run_tool(session, "python", str(script.relative_to(ROOT)), *session.posargs)


@nox.session(venv_backend="none")
def dex_examples(session: nox.Session) -> None:
    """Dex's own Python example applications and their tests against the local engine.

    Not part of the default run: it needs a Dex clone, named by ``DEX_REPO`` (or
    ``nox -s dex_examples -- --repo PATH``), and builds the examples' own environment
    (their locked dependencies, from the package index) in ``.nox/dex-examples``.
    """
    if not os.environ.get("DEX_REPO") and "--repo" not in session.posargs:
        session.skip("no Dex clone given: set DEX_REPO or pass -- --repo PATH")
    sync(session)
    harness = "packages/local-engine/tests/dex_examples/run_dex_examples.py"
    venv = str(ROOT / ".nox" / "dex-examples")
    run_tool(session, "python", harness, "--venv", venv, *session.posargs)


@nox.session(venv_backend="none")
def packaging(session: nox.Session) -> None:
    """Build and check every wheel and sdist; install each adapter alone and run its conformance.

    Each adapter goes into a fresh virtualenv outside the workspace with only the built core,
    engine, adapter and conformance wheels (third-party dependencies from PyPI), where a demo
    smoke session and the adapter's conformance suite run; the example adapter
    (``examples/minimal-adapter``) runs the whole suite the same way, as a maintainer's own
    project. The script needs only the standard library and uv; it prints install sizes and
    import times.
    """
    session.run(sys.executable, "scripts/check_packaging.py", *session.posargs)


# The third-party frameworks each runner claims, by the package whose pyproject states the
# range (an extra's range counts too). `compat` tests both ends of each range.
FRAMEWORKS = {
    "core": ("packages/core", ["dex-python-sdk", "openai", "anthropic", "litellm", "mcp"]),
    "pydantic-ai": ("packages/pydantic-ai", ["pydantic-ai-slim"]),
    "openai-agents": ("packages/openai-agents", ["openai-agents"]),
    "langgraph": ("packages/langgraph", ["langgraph", "langchain-core"]),
    "claude-sdk": ("packages/claude-sdk", ["anthropic"]),
}


def claimed_requirement(package: str, framework: str) -> Requirement:
    """The requirement on ``framework`` that ``package``'s pyproject states."""
    project = tomllib.loads((ROOT / package / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {}).values()
    for line in [*project["dependencies"], *(line for extra in extras for line in extra)]:
        requirement = Requirement(line)
        if requirement.name == framework:
            return requirement
    raise ValueError(f"{package}/pyproject.toml does not name {framework}")


def oldest_claimed(requirement: Requirement) -> str:
    """The lower bound of a claimed range, as an exact pin (every range must have one)."""
    for spec in requirement.specifier:
        if spec.operator in (">=", "=="):
            return f"{requirement.name}=={spec.version}"
    raise ValueError(f"{requirement} has no lower bound to test")


@nox.session
@nox.parametrize("end", ["oldest", "newest"])
@nox.parametrize("adapter", list(FRAMEWORKS))
def compat(session: nox.Session, adapter: str, end: str) -> None:
    """A runner's tests and conformance at one end of its frameworks' claimed ranges.

    The oldest end pins each framework's lower bound, the newest upgrades it to the newest
    release the range allows (from PyPI; not part of the default run).

    The claimed ranges are read from the pyprojects, so the README's table, the pyprojects
    and these runs agree; a range whose ends fail here must be narrowed.
    """
    package, frameworks = FRAMEWORKS[adapter]
    # Its own venv: the pins below must not change the shared one.
    sync(session, venv=Path(session.virtualenv.location))
    requirements = [claimed_requirement(package, framework) for framework in frameworks]
    if end == "oldest":
        pins = [oldest_claimed(requirement) for requirement in requirements]
        session.run_install("uv", "pip", "install", "--python", sys_python(session), *pins)
    else:
        upgrades = [f"--upgrade-package={requirement.name}" for requirement in requirements]
        specs = [str(requirement.name) + str(requirement.specifier) for requirement in requirements]
        session.run_install(
            "uv", "pip", "install", "--python", sys_python(session), *upgrades, *specs
        )
    for framework in frameworks:
        session.run(
            "python",
            "-c",
            f"from importlib.metadata import version; print('{framework}', version('{framework}'))",
        )
    session.run("pytest", f"{package}/tests", *session.posargs)


def sys_python(session: nox.Session) -> str:
    return str(Path(session.virtualenv.location) / "bin" / "python")


@nox.session(venv_backend="none")
def fuzz(session: nox.Session) -> None:
    """Kill-anywhere fuzzing for 30 minutes on Stepwise and every adapter at once (not
    part of the default run, which has a short seeded run in the core's tests).

    Pass options after ``--``, such as ``nox -s fuzz -- --seconds 120 --seed 3`` or
    ``--runners stepwise,langgraph``.
    """
    sync(session)
    arguments = session.posargs or ["--seconds", "1800"]
    run_tool(session, "python", "-m", "dex_agents.testing.kill_fuzz", *arguments)


@nox.session(venv_backend="none")
def faults(session: nox.Session) -> None:
    """Faults between processes (not part of the default run, which has a short seeded
    run in the core's tests): a token-secured engine, two Worker processes and a client
    behind a TCP proxy that resets, black-holes and slows their links, with engine and
    Worker SIGKILLs and SIGTERMs, while sessions of every runner run turns.

    ``DEX_FAULTS_SEED`` (1), ``DEX_FAULTS_COUNT`` (300 faults) and ``DEX_FAULTS_SESSIONS``
    (20, over all runners) set the run; options after ``--`` go to the command as well
    (``nox -s faults -- --runners stepwise,langgraph``). The report is printed and written
    to ``.nox/faults-report.json``.
    """
    sync(session)
    arguments = [
        "--seed",
        os.environ.get("DEX_FAULTS_SEED", "1"),
        "--faults",
        os.environ.get("DEX_FAULTS_COUNT", "300"),
        "--sessions",
        os.environ.get("DEX_FAULTS_SESSIONS", "20"),
        "--json",
        str(ROOT / ".nox" / "faults-report.json"),
    ]
    run_tool(
        session, "python", "-m", "dex_agents.testing.fault_injection", *arguments, *session.posargs
    )
