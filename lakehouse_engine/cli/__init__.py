"""The `lakehouse` command line: inspect Paimon tables and run Paimon's maintenance procedures."""

from lakehouse_engine.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
