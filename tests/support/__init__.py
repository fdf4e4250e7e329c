"""Test support shared by the tests and the reliability benchmarks (not part of the engine)."""
