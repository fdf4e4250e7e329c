"""Scripts that drive the code location from outside (`make run`, the screenshots, the shared
Dagster home); loading the code location imports none of them."""
