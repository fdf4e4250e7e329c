"""`python -m lakehouse_engine.cli`: the same as the `lakehouse` console script."""

from lakehouse_engine.cli.app import main

raise SystemExit(main())
