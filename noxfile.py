"""Every check of the project is a nox session; CI runs the default ones.

Each session syncs the locked uv workspace into its own virtualenv, so a run
checks exactly what ``uv.lock`` pins and nothing that happens to be installed.
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.needs_version = ">=2026.10.20"
nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "typecheck", "tests", "conformance"]

ROOT = Path(__file__).parent
PACKAGE_TESTS = sorted(
    str(path.relative_to(ROOT))
    for path in [*ROOT.glob("packages/*/tests"), ROOT / "tests-shared/tests"]
)
# Each runner proves the session contract with the shared suite, one session each,
# so a failure names the runner. "core" is the scripted runner and Stepwise.
ADAPTERS = {
    "core": "packages/core",
    "pydantic-ai": "packages/pydantic-ai",
    "openai-agents": "packages/openai-agents",
    "langgraph": "packages/langgraph",
    "claude-sdk": "packages/claude-sdk",
}


def sync(session: nox.Session, *extra: str) -> None:
    """Install the whole locked workspace, all extras and the dev group, into this session."""
    session.run_install(
        "uv",
        "sync",
        "--locked",
        "--all-packages",
        "--all-extras",
        *extra,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff lint and format check over the whole tree."""
    sync(session)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """pyright in strict mode over every package's src/."""
    sync(session)
    session.run(
        "pyright", "--pythonpath", str(Path(session.virtualenv.location) / "bin" / "python")
    )


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's own tests, against the real local engine (conformance runs apart).

    One pytest run per package, so each package's conftest and helper modules stay its own.
    """
    sync(session)
    for tests_dir in PACKAGE_TESTS:
        session.run("pytest", "-m", "not conformance", tests_dir, *session.posargs)


@nox.session
@nox.parametrize("adapter", list(ADAPTERS))
def conformance(session: nox.Session, adapter: str) -> None:
    """The shared conformance suite against one runner."""
    tests_dir = ROOT / ADAPTERS[adapter] / "tests"
    if not any(tests_dir.glob("test_conformance*.py")):
        session.skip(f"{adapter} has no conformance tests yet")
    sync(session)
    session.run("pytest", "-m", "conformance", str(tests_dir.relative_to(ROOT)), *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Run every benchmark script; each prints its figures (not part of the default run)."""
    sync(session, "--group", "bench")  # DBOS, the engine benchmark's comparison
    scripts = sorted(ROOT.glob("benchmarks/*.py"))
    if not scripts:
        session.skip("no benchmark scripts yet")
    for script in scripts:
        session.run("python", str(script.relative_to(ROOT)), *session.posargs)
