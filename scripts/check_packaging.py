"""Build every distribution and prove each one installs and works outside the workspace.

Run by ``nox -s packaging``. Steps:

1. ``uv build`` every workspace member (sdist, then the wheel built from that sdist).
2. Check the metadata: one version line, ``==`` pins between our packages, no path or
   URL dependencies, the license file, README, project URLs and ``py.typed`` shipped.
3. For the core alone and for each adapter, a fresh virtual environment in a temporary
   directory (outside the workspace) with only the built wheels installed, plus PyPI for
   third-party dependencies. There: ``dex-agents version``, a smoke session of the demo on
   the embedded engine, and for an adapter its conformance suite through the
   ``dex-agents-conformance`` pytest plugin. The core alone also proves that a model
   client whose extra is missing fails with a message naming the extra.
4. The conformance README's example adapter (``examples/minimal-adapter``), installed
   from its directory with the built wheels in a fresh environment, runs the whole
   suite there, as an adapter maintainer's own project would.
5. Print the install size and import time of the core and of each adapter.

Only the standard library is used, so the script runs in any interpreter that has uv on
its PATH. ``--adapter NAME`` (repeatable) limits step 3 to some adapters; ``--no-example``
skips step 4 and ``--only-example`` runs only it after the build; ``--keep`` keeps the
temporary directory.
"""

from __future__ import annotations

import argparse
import email.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LICENSE_EXPRESSION = "Apache-2.0"
CORE = "dex-agents"
ENGINE = "dex-local-engine"
CONFORMANCE = "dex-agents-conformance"
EXAMPLE_ADAPTER = ROOT / "examples" / "minimal-adapter"


@dataclass(frozen=True)
class Adapter:
    dist: str
    module: str
    directory: str


ADAPTERS = (
    Adapter("dex-agents-openai-agents", "dex_agents_openai_agents", "packages/openai-agents"),
    Adapter("dex-agents-langgraph", "dex_agents_langgraph", "packages/langgraph"),
    Adapter("dex-agents-pydantic-ai", "dex_agents_pydantic_ai", "packages/pydantic-ai"),
    Adapter("dex-agents-claude-sdk", "dex_agents_claude_sdk", "packages/claude-sdk"),
)

# Modules of the core that need an extra; without it, importing one must fail with a
# message that names the extra. Each must be in the core's wheel.
EXTRA_MODULES = {
    "dex_agents.models._openai_responses": "openai",
    "dex_agents.models._openai_chat": "openai",
    "dex_agents.models._anthropic_messages": "anthropic",
    "dex_agents.models._litellm": "litellm",
    "dex_agents.mcp": "mcp",
    "dex_agents.ui_stream": "ui",
}
# Modules that every session imports and that turn themselves off without their extra:
# importing one must work and must not import the extra's packages.
INERT_WITHOUT_EXTRA = {"dex_agents.tracing": ("otel", "opentelemetry")}

# Variables that would make a fresh environment see the workspace or a real provider.
SCRUBBED_ENV = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "UV_PROJECT_ENVIRONMENT",
    "DEXCLI",
    "DEX_SERVER_ADDRESS",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "PYTHONDONTWRITEBYTECODE",
)


class PackagingError(Exception):
    """A built distribution breaks a packaging rule."""


def fail(message: str) -> None:
    raise PackagingError(message)


def member_pyprojects() -> dict[str, dict[str, object]]:
    """Every workspace member's ``[project]`` table, by distribution name."""
    projects: dict[str, dict[str, object]] = {}
    paths = [*sorted(ROOT.glob("packages/*/pyproject.toml")), ROOT / "tests-shared/pyproject.toml"]
    for path in paths:
        project = tomllib.loads(path.read_text())["project"]
        projects[project["name"]] = project
    return projects


def workspace_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


# --- building and metadata -------------------------------------------------------------


def build_all(dist_dir: Path) -> None:
    started = time.perf_counter()
    run(["uv", "build", "--all-packages", "--quiet", "--out-dir", str(dist_dir)], cwd=ROOT)
    print(f"built {len(list(dist_dir.iterdir()))} files in {time.perf_counter() - started:.1f} s")


def wheel_path(dist_dir: Path, dist: str, version: str) -> Path:
    path = dist_dir / f"{normalized(dist)}-{version}-py3-none-any.whl"
    if not path.is_file():
        fail(f"no wheel for {dist} {version} in {dist_dir}")
    return path


def sdist_path(dist_dir: Path, dist: str, version: str) -> Path:
    path = dist_dir / f"{normalized(dist)}-{version}.tar.gz"
    if not path.is_file():
        fail(f"no sdist for {dist} {version} in {dist_dir}")
    return path


def check_version_line(projects: dict[str, dict[str, object]], version: str) -> None:
    for dist, project in projects.items():
        if project["version"] != version:
            fail(f"{dist} is at {project['version']}, the workspace at {version}")


def check_wheel(path: Path, dist: str, version: str, ours: set[str], license_text: str) -> None:
    module = normalized(dist)
    dist_info = f"{module}-{version}.dist-info"
    with zipfile.ZipFile(path) as wheel:
        names = set(wheel.namelist())
        metadata = email.parser.Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())
        shipped_license = (
            wheel.read(f"{dist_info}/licenses/LICENSE").decode()
            if f"{dist_info}/licenses/LICENSE" in names
            else None
        )
    where = path.name
    if metadata["Version"] != version:
        fail(f"{where}: Version {metadata['Version']}, expected {version}")
    if metadata["License-Expression"] != LICENSE_EXPRESSION:
        fail(f"{where}: License-Expression {metadata['License-Expression']!r}")
    if metadata.get_all("License-File") != ["LICENSE"] or shipped_license != license_text:
        fail(f"{where}: does not ship the repository's LICENSE")
    if metadata["Description-Content-Type"] != "text/markdown" or not metadata.get_payload():
        fail(f"{where}: no Markdown README as its description")
    if not metadata.get_all("Project-URL"):
        fail(f"{where}: no project URLs")
    if not any(name.endswith("/py.typed") and name.count("/") == 1 for name in names):
        fail(f"{where}: no py.typed marker in its package")
    for requirement in metadata.get_all("Requires-Dist") or []:
        check_requirement(where, requirement, version, ours)


def check_requirement(where: str, requirement: str, version: str, ours: set[str]) -> None:
    if " @ " in requirement.split(";")[0]:
        fail(f"{where}: direct reference dependency {requirement!r} (only works in the workspace)")
    name = re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0]
    if name.startswith("dex-agents") or name == ENGINE:
        if name not in ours:
            fail(f"{where}: depends on {name}, which the workspace does not build")
        if not re.fullmatch(rf"{re.escape(name)}(\[[\w,]+\])?=={re.escape(version)}", requirement):
            fail(f"{where}: {requirement!r} must pin {name}=={version}")


def check_sdist(path: Path, dist: str, version: str) -> None:
    top = f"{normalized(dist)}-{version}"
    with tarfile.open(path) as sdist:
        names = set(sdist.getnames())
    for required in ("PKG-INFO", "pyproject.toml", "README.md", "LICENSE"):
        if f"{top}/{required}" not in names:
            fail(f"{path.name}: {required} missing")
    if not any(name.endswith("/py.typed") for name in names):
        fail(f"{path.name}: no py.typed marker")


def check_metadata(dist_dir: Path, projects: dict[str, dict[str, object]], version: str) -> None:
    license_text = (ROOT / "LICENSE").read_text()
    ours = set(projects)
    check_version_line(projects, version)
    for dist in projects:
        check_wheel(wheel_path(dist_dir, dist, version), dist, version, ours, license_text)
        check_sdist(sdist_path(dist_dir, dist, version), dist, version)
    print(
        f"metadata of {len(projects)} wheels and sdists at {version}: pins, license, README, typed"
    )


# --- fresh environments ----------------------------------------------------------------


def clean_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in SCRUBBED_ENV}


def run(
    command: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 1800
) -> str:
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        fail(
            f"{' '.join(command)} exited with {result.returncode}\n"
            f"{result.stdout[-6000:]}\n{result.stderr[-4000:]}"
        )
    return result.stdout


@dataclass
class FreshEnvironment:
    """A virtual environment outside the workspace that sees only what it installed."""

    directory: Path

    @classmethod
    def create(cls, directory: Path) -> FreshEnvironment:
        run(
            ["uv", "venv", "--quiet", "--python", sys.executable, str(directory / "venv")],
            cwd=directory.parent,
            env=clean_env(),
        )
        return cls(directory)

    @property
    def python(self) -> Path:
        return self.directory / "venv" / "bin" / "python"

    def install(self, dist_dir: Path, *requirements: str) -> None:
        """Install as the README tells a user to before a release: from the built wheels,
        found by name with ``--find-links``, third-party dependencies from PyPI. A local
        project's ``[tool.uv.sources]`` (the workspace) are ignored."""
        run(
            [
                "uv",
                "pip",
                "install",
                "--quiet",
                "--no-sources",
                "--python",
                str(self.python),
                "--find-links",
                str(dist_dir),
                *requirements,
            ],
            cwd=self.directory,
            env=clean_env(),
        )

    def run(self, *arguments: str, timeout: float = 1800) -> str:
        environment = clean_env()
        environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        environment["PATH"] = f"{self.python.parent}{os.pathsep}{environment.get('PATH', '')}"
        return run([*arguments], cwd=self.directory, env=environment, timeout=timeout)

    def size_mb(self) -> float:
        site_packages = next((self.directory / "venv" / "lib").glob("python*/site-packages"))
        total = sum(path.stat().st_size for path in site_packages.rglob("*") if path.is_file())
        return total / 1e6

    def import_ms(self, module: str) -> tuple[float, float]:
        """Warm import time, wall clock and CPU, in ms: the second of two fresh interpreters
        (the first compiles). CPU time stays meaningful on a busy machine; wall time does not."""
        code = (
            "import time; wall, cpu = time.perf_counter(), time.process_time(); "
            f"import {module}; "
            "print((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3)"
        )
        self.run(str(self.python), "-c", code)
        wall, cpu = self.run(str(self.python), "-c", code).split()
        return float(wall), float(cpu)


def check_version_command(environment: FreshEnvironment, expected: list[str], version: str) -> None:
    output = environment.run("dex-agents", "version")
    for dist in expected:
        if not re.search(rf"^{re.escape(dist)}\s+{re.escape(version)}$", output, re.MULTILINE):
            fail(f"`dex-agents version` does not list {dist} {version}:\n{output}")


def smoke_session(environment: FreshEnvironment) -> None:
    """A two-turn demo session on the embedded engine, approval included."""
    output = environment.run(
        "dex-agents",
        "demo",
        "--provider",
        "scripted",
        "--db",
        str(environment.directory / "demo.sqlite3"),
        "--message",
        "Where is order 42?",
        "--message",
        "Refund it",
        "--auto-approve",
        timeout=300,
    )
    if output.count("agent>") < 2 or "resume later with" not in output:
        fail(f"the demo smoke session did not finish both turns:\n{output}")


def check_no_extras_installed(environment: FreshEnvironment) -> None:
    """The core alone pulls in no package that only an extra of it needs."""
    core = tomllib.loads((ROOT / "packages/core/pyproject.toml").read_text())["project"]
    extra_packages = {
        re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0].lower()
        for lines in core.get("optional-dependencies", {}).values()
        for line in lines
    }
    listing = environment.run(
        str(environment.python),
        "-c",
        "import importlib.metadata as m\n"
        "print('\\n'.join(d.metadata['Name'].lower() for d in m.distributions()))",
    )
    unwanted = extra_packages & set(listing.split())
    if unwanted:
        fail(f"installing the core alone also installs {sorted(unwanted)}, which only extras need")


def check_missing_extras(environment: FreshEnvironment) -> list[str]:
    """Each extra-gated module fails to import without its extra, and each module that
    turns itself off imports without pulling its extra in; the extras checked."""
    checked: list[str] = []
    for module, extra in EXTRA_MODULES.items():
        code = (
            "import sys\nfrom importlib.util import find_spec\n"
            f"if find_spec({module!r}) is None:\n    print('absent')\n    sys.exit()\n"
            f"try:\n    import {module}\n"
            "except ImportError as error:\n    print(error)\nelse:\n    sys.exit('imported')\n"
        )
        message = environment.run(str(environment.python), "-c", code).strip()
        if message == "absent":
            fail(f"{module} is not in the core's wheel")
        if f"dex-agents[{extra}]" not in message:
            fail(f"importing {module} without its extra says {message!r}, not the extra's name")
        if f"[{extra}]" not in checked:
            checked.append(f"[{extra}]")
    for module, (extra, package) in INERT_WITHOUT_EXTRA.items():
        code = (
            f"import sys\nimport {module}\n"
            f"print(any(name.split('.')[0] == {package!r} for name in sys.modules))\n"
        )
        if environment.run(str(environment.python), "-c", code).strip() != "False":
            fail(f"importing {module} without [{extra}] imports {package}")
        checked.append(f"[{extra}] (inert)")
    return checked


def run_conformance(environment: FreshEnvironment, test_module: Path) -> str:
    """A conformance test module, copied out of the workspace, run on the plugin."""
    tests = environment.directory / "tests"
    tests.mkdir()
    shutil.copy(test_module, tests)
    # The configuration the conformance README gives maintainers; warnings are errors.
    (tests / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = error::pytest.PytestDeprecationWarning\n"
    )
    # Only the plugins named here: the suite's own and pytest-asyncio, as an adapter
    # maintainer's project would load them, and nothing a framework happens to register.
    plugins = ["-p", "dex_agents_conformance.plugin", "-p", "pytest_asyncio.plugin"]
    output = environment.run(
        str(environment.python),
        "-m",
        "pytest",
        "-c",
        str(tests / "pytest.ini"),
        "--rootdir",
        str(tests),
        "-p",
        "no:cacheprovider",
        *plugins,
        "-m",
        "conformance",
        "-q",
        str(tests),
    )
    return output.strip().splitlines()[-1]


@dataclass
class Figures:
    name: str
    size_mb: float
    import_ms: tuple[float, float]
    note: str = ""


def check_core_alone(work: Path, dist_dir: Path, version: str) -> Figures:
    environment = FreshEnvironment.create(work / "core")
    environment.install(dist_dir, f"{CORE}=={version}")
    figures = Figures(CORE, environment.size_mb(), environment.import_ms("dex_agents"))
    check_version_command(environment, [CORE, ENGINE], version)
    smoke_session(environment)
    check_no_extras_installed(environment)
    extras = check_missing_extras(environment)
    print(f"core alone: version, smoke session, messages for the missing {' '.join(extras)}")
    return figures


def check_adapter(work: Path, dist_dir: Path, version: str, adapter: Adapter) -> Figures:
    started = time.perf_counter()
    environment = FreshEnvironment.create(work / adapter.dist)
    environment.install(dist_dir, f"{adapter.dist}=={version}")
    figures = Figures(adapter.dist, environment.size_mb(), environment.import_ms(adapter.module))
    environment.install(dist_dir, f"{CONFORMANCE}=={version}")
    check_version_command(environment, [CORE, ENGINE, adapter.dist, CONFORMANCE], version)
    smoke_session(environment)
    # The adapter's main conformance module; a second variant (LangGraph's prebuilt agent)
    # runs in `nox -s conformance` only, as it proves the same wheel and doubles the time.
    test_module = ROOT / adapter.directory / "tests" / "test_conformance.py"
    figures.note = run_conformance(environment, test_module)
    print(f"{adapter.dist}: {figures.note} in {time.perf_counter() - started:.0f} s")
    return figures


def check_example_adapter(work: Path, dist_dir: Path, version: str) -> Figures:
    """The maintainer's guide's example: its own project, the built wheels, the whole suite."""
    started = time.perf_counter()
    environment = FreshEnvironment.create(work / EXAMPLE_ADAPTER.name)
    project = environment.directory / "project"
    shutil.copytree(EXAMPLE_ADAPTER, project, ignore=shutil.ignore_patterns("tests", "*.pyc"))
    environment.install(dist_dir, str(project), f"{CONFORMANCE}=={version}")
    figures = Figures(
        EXAMPLE_ADAPTER.name, environment.size_mb(), environment.import_ms("minimal_adapter")
    )
    figures.note = run_conformance(environment, EXAMPLE_ADAPTER / "tests" / "test_conformance.py")
    print(f"{EXAMPLE_ADAPTER.name}: {figures.note} in {time.perf_counter() - started:.0f} s")
    return figures


def print_figures(figures: list[Figures]) -> None:
    print()
    print("install size: site-packages with core, engine, the adapter and their dependencies")
    print(f"{'distribution':<26} {'size MB':>8} {'import ms':>10} {'(CPU ms)':>9}  conformance")
    for row in figures:
        wall, cpu = row.import_ms
        print(f"{row.name:<26} {row.size_mb:>8.1f} {wall:>10.0f} {cpu:>9.0f}  {row.note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--adapter", action="append", choices=[a.dist for a in ADAPTERS])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    example = parser.add_mutually_exclusive_group()
    example.add_argument(
        "--no-example", action="store_true", help="skip the example adapter's conformance run"
    )
    example.add_argument(
        "--only-example", action="store_true", help="after the build, check only the example"
    )
    args = parser.parse_args(argv)
    chosen = [a for a in ADAPTERS if not args.adapter or a.dist in args.adapter]

    version = workspace_version()
    projects = member_pyprojects()
    work = Path(tempfile.mkdtemp(prefix="dex-agents-packaging-"))
    started = time.perf_counter()
    try:
        dist_dir = work / "dist"
        build_all(dist_dir)
        check_metadata(dist_dir, projects, version)
        figures: list[Figures] = []
        if not args.only_example:
            figures.append(check_core_alone(work, dist_dir, version))
            figures += [check_adapter(work, dist_dir, version, adapter) for adapter in chosen]
        if not args.no_example:
            figures.append(check_example_adapter(work, dist_dir, version))
        print_figures(figures)
    except PackagingError as error:
        print(f"packaging check failed: {error}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\npackaging checks passed in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
