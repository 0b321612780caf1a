"""pytest plugin entry point of the conformance suite (scenarios arrive with the core)."""
