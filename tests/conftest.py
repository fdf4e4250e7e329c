"""Settings shared by every test package."""

from hypothesis import HealthCheck, settings

# Hypothesis' `too_slow` health check times input generation with the wall clock: on a loaded
# 2-core machine (Spark and JVM tests in the other pytest worker) it fails tests whose inputs are
# fine. Each property test still sets its own example count and deadline.
settings.register_profile("lakehouse", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("lakehouse")
