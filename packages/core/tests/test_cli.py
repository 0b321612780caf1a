from dex_agents import __version__
from dex_agents import _cli as cli


def test_version_lists_core_engine_and_sdk(capsys) -> None:  # type: ignore[no-untyped-def]
    assert cli.main(["version"]) == 0
    out = capsys.readouterr().out
    assert f"dex-agents                 {__version__}" in out
    assert "dex-local-engine" in out
    assert "dex-python-sdk             1.23.0" in out
