"""The dex-agents runner conformance suite, as a pytest plugin for adapter maintainers.

Subclass ``dex_agents_conformance.suite.ConformanceSuite`` in a test module and
provide a ``conformance_adapter`` fixture returning a ``ConformanceAdapter``;
see the package README. This module stays light because pytest imports the
plugin, and with it this package, in every run where it is installed.
"""

from importlib.metadata import version as _version

from dex_agents_conformance.adapter import ALL_CAPABILITIES, Capability, ConformanceAdapter
from dex_agents_conformance.rules import ContractRule

__version__ = _version("dex-agents-conformance")

__all__ = ["ALL_CAPABILITIES", "Capability", "ConformanceAdapter", "ContractRule", "__version__"]
