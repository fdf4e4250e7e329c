"""The resources every asset, check, sensor and schedule gets, with the deployment's settings bound
to environment variables through `dg.EnvVar`: resolved when a run (or a tick) starts, never when
the code location is imported. `dagster dev` (`make dev`) reads them from the project's `.env`,
whose values the caller's environment overrides (`${LAKEHOUSE_WAREHOUSE:-./warehouse}`).

| variable | resource field | `.env` default |
|---|---|---|
| `LAKEHOUSE_WAREHOUSE` | `lakehouse.warehouse` | `./warehouse` |
| `LAKEHOUSE_TABLE` | `lakehouse.table` | `shop.orders` |
| `LAKEHOUSE_BUCKET` | `lakehouse.bucket` (of a new table) | `4` |
| `LAKEHOUSE_CATALOG_OPTIONS` | `lakehouse.catalog_options_json` (a JSON object) | empty: none |
| `LAKEHOUSE_PIPELINE_DIR` | `lakehouse.pipeline_dir` | empty: the local warehouse |
| `LAKEHOUSE_SPARK_MASTER` | `spark.master` | `local[*]` |

Everything else is resource config with a default in code (`evolve_schema`, `table_options`,
`spark_config`, ...), changed per run in the launchpad.
"""

import dagster as dg

from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource

defs = dg.Definitions(resources={
    "lakehouse": LakehouseResource(
        warehouse=dg.EnvVar("LAKEHOUSE_WAREHOUSE"),
        table=dg.EnvVar("LAKEHOUSE_TABLE"),
        bucket=dg.EnvVar.int("LAKEHOUSE_BUCKET"),
        catalog_options_json=dg.EnvVar("LAKEHOUSE_CATALOG_OPTIONS"),
        pipeline_dir=dg.EnvVar("LAKEHOUSE_PIPELINE_DIR"),
    ),
    "spark": LakehouseSparkResource(master=dg.EnvVar("LAKEHOUSE_SPARK_MASTER")),
})
